package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

func mac(key, content string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(content))
	return m.Sum(nil)
}

func TestSignaturesMatch(t *testing.T) {
	const content = "1700000000.{}"
	write := func(m hash.Hash) { m.Write([]byte(content)) }
	secrets := []string{"new", "old", "older"}
	for _, c := range []struct {
		name string
		sigs webhooks.Signatures
		want int
	}{
		{"None", nil, -1},
		{"First", webhooks.Signatures{mac("new", content)}, 0},
		{"Second", webhooks.Signatures{mac("old", content)}, 1},
		{"LastOfSeveral", webhooks.Signatures{mac("x", content), []byte("short"), mac("older", content)}, 2},
		// The sender signs with two secrets while rolling one: the first
		// configured one that matches is reported.
		{"Both", webhooks.Signatures{mac("older", content), mac("old", content)}, 1},
		{"OtherContent", webhooks.Signatures{mac("new", content+" ")}, -1},
		{"Truncated", webhooks.Signatures{mac("new", content)[:16]}, -1},
		{"Empty", webhooks.Signatures{{}}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.sigs.Match(secrets, write); got != c.want {
				t.Errorf("Match = %d, want %d", got, c.want)
			}
			keys := make([][][]byte, len(secrets))
			for i, s := range secrets {
				keys[i] = [][]byte{[]byte("not " + s), []byte(s)}
			}
			secret, key := c.sigs.MatchKeys(keys, write)
			wantKey := 1
			if c.want < 0 {
				wantKey = -1
			}
			if secret != c.want || key != wantKey {
				t.Errorf("MatchKeys = %d, %d; want %d, %d", secret, key, c.want, wantKey)
			}
		})
	}
}

// TestSignaturesMatchTriesEverySecret: write is called once per secret
// tried, up to the one that matches, whatever the number of signatures.
func TestSignaturesMatchTriesEverySecret(t *testing.T) {
	calls := 0
	write := func(m hash.Hash) { calls++; m.Write([]byte("body")) }
	sigs := webhooks.Signatures{mac("a", "x"), mac("b", "x"), mac("c", "body")}
	if got := sigs.Match([]string{"a", "b", "c", "d"}, write); got != 2 || calls != 3 {
		t.Errorf("Match = %d after %d MACs, want 2 after 3", got, calls)
	}
	calls = 0
	if got := sigs.Match([]string{"a", "b"}, write); got != -1 || calls != 2 {
		t.Errorf("Match = %d after %d MACs, want -1 after 2", got, calls)
	}
}

func TestSignInputMessageID(t *testing.T) {
	a := webhooks.SignInput{Body: []byte(`{"a":1}`)}.MessageID()
	if a != (webhooks.SignInput{Body: []byte(`{"a":1}`)}).MessageID() || !strings.HasPrefix(a, "msg_") || len(a) != 4+32 {
		t.Errorf("MessageID %q is not msg_ and 32 hex digits, the same for the same body", a)
	}
	if b := (webhooks.SignInput{Body: []byte(`{"a":2}`)}).MessageID(); b == a {
		t.Errorf("two bodies, one id %q", a)
	}
	if id := (webhooks.SignInput{Body: []byte(`{"a":1}`), ID: "msg_given"}).MessageID(); id != "msg_given" {
		t.Errorf("MessageID %q, want the given id", id)
	}
}
