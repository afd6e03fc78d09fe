package webhooks_test

import (
	"bytes"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// repeatsByJSONv2 is what json/v2 says of body: whether reading it, as
// RepeatedName's second pass does, stops at a repeated member name.
func repeatsByJSONv2(body []byte) bool {
	d := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowInvalidUTF8(true))
	_, err := d.ReadValue()
	var serr *jsontext.SyntacticError
	return errors.As(err, &serr) && errors.Is(serr.Err, jsontext.ErrDuplicateName)
}

// bigObject is a body with an object of n members (more than 16 are
// compared sorted), the last repeating the name of member k when k >= 0.
func bigObject(n, k int) string {
	var b strings.Builder
	b.WriteString(`{"id":"evt_1","data":{"object":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("field_%02d", i)
		if i == n-1 && k >= 0 {
			name = fmt.Sprintf("field_%02d", k)
		}
		fmt.Fprintf(&b, `%q: {"id": %d, "list": [1, "two", null, {"x": true}]}`, name, i)
	}
	b.WriteString(`}}}`)
	return b.String()
}

var nameSeeds = []string{
	`{"id":"evt_1","data":{"object":{"id":"cs_1","amount_total":1000}}}`,
	`{"a":{"id":1},"b":{"id":1},"c":[{"id":1},{"id":1}]}`,
	`{"id":`, ``, `{}`, `[]`, `[{}]`, `"x"`, `1`, `{"a":1}x`, `{"a":1 "a":2}`, `{"a":1,"a":2`,
	`{"id":"evt_1","data":{"object":{"customer_email":"a@example.com"}},"data":{"object":{"amount_total":1}}}`,
	`{"id":"evt_1","data":{"object":{"amount_total":1000,"amount_total":1}}}`,
	`{"lines":[{"id":"il_1"},{"id":"il_2","id":"il_3"}]}`,
	`{"email":"a@example.com","\u0065mail":"b@example.com"}`,
	"{\"n\":\"\xff\",\"n\":1}",
	"{\"\xff\":1,\"\xfe\":2}",
	`{"a\"b":1,"a\"b":2}`, `{"a\\":1,"a\\":2}`, `{"s":"x\\","s":1}`, `{"s":"\"}","t":{"s":1}}`,
	`{"größe":1,"größe":2}`, `{"b":tru,"a":1,"a":2}`, ` { "a" : [ ] , "b" : { } } `,
	bigObject(80, -1), bigObject(80, 3), bigObject(17, 15), bigObject(16, 0),
}

// TestScanNames: the quick pass agrees with json/v2 on every body it is
// sure of, is sure of plain bodies, finds a repeat among many members, and
// RepeatedName answers as json/v2 alone did.
func TestScanNames(t *testing.T) {
	for _, s := range nameSeeds {
		checkScanNames(t, []byte(s))
	}
	for _, c := range []struct {
		body          string
		repeats, sure bool
	}{
		{bigObject(80, -1), false, true},
		{bigObject(80, 3), true, true},
		{bigObject(17, 15), true, true},
		{`{"a":{"id":1},"b":{"id":1}}`, false, true},
		{`{"email":"a","\u0065mail":"b"}`, false, false},
		{`{"a":1}x`, false, false},
	} {
		if repeats, sure := webhooks.ScanNames([]byte(c.body)); repeats != c.repeats || sure != c.sure {
			t.Errorf("ScanNames(%.60q) = %v, %v; want %v, %v", c.body, repeats, sure, c.repeats, c.sure)
		}
	}
}

func checkScanNames(t *testing.T, body []byte) {
	t.Helper()
	want := repeatsByJSONv2(body)
	repeats, sure := webhooks.ScanNames(body)
	if sure && !repeats && want {
		t.Fatalf("ScanNames(%q) is sure no name repeats; json/v2 finds one", body)
	}
	if sure && jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) && repeats != want {
		t.Fatalf("ScanNames(%q) = %v, sure; json/v2 says %v", body, repeats, want)
	}
	if got := webhooks.RepeatedName(body) != nil; got != want {
		t.Fatalf("RepeatedName(%q) found a repeat: %v; json/v2: %v", body, got, want)
	}
}

// FuzzScanNames compares the quick pass with json/v2 on any bytes.
func FuzzScanNames(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScanNames)
}
