package webhooks_test

import (
	"bytes"
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
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

// TestLeadingScalar: a top-level scalar member is found when no object or
// array comes before it, as its raw JSON; anything else is not found.
func TestLeadingScalar(t *testing.T) {
	for _, c := range []struct {
		body, name, want string
		ok               bool
	}{
		{`{"id":"evt_1","object":"event","created":1764460800,"data":{}}`, "created", "1764460800", true},
		{` { "created" : -12 , "data" : {} } `, "created", "-12", true},
		{`{"id":"evt_1","created":1.5e9}`, "created", "1.5e9", true},
		{`{"id":"evt_1","created":null}`, "created", "null", true},
		{`{"a":"x\"y\\","created":7}`, "created", "7", true},
		{`{"created":"1764460800"}`, "created", `"1764460800"`, true},
		{`{"id":"evt_1","data":{"created":1},"created":2}`, "created", "", false},
		{`{"id":"evt_1","list":[1],"created":2}`, "created", "", false},
		{`{"cre\u0061ted":1}`, "created", "", false},
		{`{"id":"evt_1"}`, "created", "", false},
		{`{"id":"evt_1" "created":1}`, "created", "", false},
		{`{"created":}`, "created", "", false},
		{`["created",1]`, "created", "", false},
		{`{"id":"unterminated`, "created", "", false},
		{``, "created", "", false},
	} {
		v, ok := webhooks.LeadingScalar([]byte(c.body), c.name)
		if string(v) != c.want || ok != c.ok {
			t.Errorf("LeadingScalar(%s, %q) = %q %v, want %q %v", c.body, c.name, v, ok, c.want, c.ok)
		}
	}
}

// FuzzLeadingScalar: of a JSON object that repeats no name, what
// LeadingScalar finds is the member's value as json/v2 reads it.
func FuzzLeadingScalar(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","object":"event","created":1764460800,"data":{"object":{}}}`))
	f.Add([]byte(`{"a":"\u0041","created":true}`))
	f.Add([]byte(` {"x" : [ ], "created":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		v, ok := webhooks.LeadingScalar(body, "created")
		if !ok {
			return
		}
		var m map[string]jsontext.Value
		if jsonv2.Unmarshal(body, &m) != nil {
			return // not JSON, or a name repeated: a hint only
		}
		if got, found := m["created"]; !found || !bytes.Equal(got, v) {
			t.Errorf("LeadingScalar found %q, json/v2 reads %q (found %v) in %q", v, got, found, body)
		}
	})
}
