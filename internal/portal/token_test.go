package portal_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/portal"
)

var (
	key1 = []byte("first key of the token tests 32b")
	key2 = []byte("second key of the token tests 32")
)

// TestTokenSealsTheCustomer: a token opens to what was sealed, names
// nothing in clear, is new at every seal, and opens with any key of the
// list (rotation) but none other.
func TestTokenSealsTheCustomer(t *testing.T) {
	keys, err := portal.NewKeys([][]byte{key1})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Unix(1_800_000_000, 0)
	c := portal.Claims{Source: "stripe", Customer: "cus_secret123", Account: "acct_1", Expires: exp}
	tok, err := keys.Seal(c)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	if bytes.Contains(raw, []byte("cus_secret123")) || strings.Contains(tok, "cus_") || len(tok) > portal.MaxToken {
		t.Errorf("the token shows the customer, or is too long: %s", tok)
	}
	again, _ := keys.Seal(c)
	if again == tok {
		t.Error("two seals of one customer made one token")
	}
	got, err := keys.Open(tok)
	if err != nil || got.Source != c.Source || got.Customer != c.Customer || got.Account != c.Account || !got.Expires.Equal(exp) || len(got.ID) != 12 {
		t.Fatalf("opened %+v, %v", got, err)
	}
	rotated, _ := portal.NewKeys([][]byte{key2, key1})
	if _, err := rotated.Open(tok); err != nil {
		t.Errorf("the list with the sealing key second: %v", err)
	}
	other, _ := portal.NewKeys([][]byte{key2})
	if _, err := other.Open(tok); err != portal.ErrForged {
		t.Errorf("another key opens it: %v", err)
	}
	for i := range raw {
		b := bytes.Clone(raw)
		b[i] ^= 0x40
		if _, err := keys.Open(base64.RawURLEncoding.EncodeToString(b)); err != portal.ErrForged {
			t.Fatalf("byte %d changed: %v", i, err)
		}
	}
	for _, bad := range []string{"", "x", "!!!", strings.Repeat("A", portal.MaxToken+1), tok[:len(tok)-2]} {
		if _, err := keys.Open(bad); err != portal.ErrForged {
			t.Errorf("Open(%.20q…): %v", bad, err)
		}
	}
}
