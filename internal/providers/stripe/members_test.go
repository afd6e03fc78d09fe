package stripe_test

import (
	"encoding/json/jsontext"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestMemberNamesEveryField: data.object's decode reads every member the
// struct's tags name, into the field the tag is on.
func TestMemberNamesEveryField(t *testing.T) {
	fields := stripe.ObjectFieldsByMember()
	if len(fields) < 20 {
		t.Fatalf("only %d fields found: %v", len(fields), fields)
	}
	for name, ok := range fields {
		if !ok {
			t.Errorf("member %q does not decode into the field tagged with it", name)
		}
	}
}

// objectSeeds are data.objects: of the fixtures, of the shared samples
// (where present), of a bench-sized invoice, and ones made to trip a
// decoder: wrong types, nulls, escaped and repeated names, no object.
func objectSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var bodies [][]byte
	for _, pattern := range []string{filepath.Join("testdata", "*.json"), filepath.Join("..", "..", "..", "..", "shared", "samples", "stripe", "*.json")} {
		files, _ := filepath.Glob(pattern)
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				tb.Fatal(err)
			}
			bodies = append(bodies, b)
		}
	}
	bodies = append(bodies, invoiceEvent(1, 1764460800))
	var out [][]byte
	for _, b := range bodies {
		var env struct {
			Data struct {
				Object jsontext.Value `json:"object"`
			} `json:"data"`
		}
		if webhooks.UnmarshalSigned(b, &env) == nil && len(env.Data.Object) > 0 {
			out = append(out, env.Data.Object)
		}
	}
	if len(out) < 10 {
		tb.Fatalf("only %d objects found", len(out))
	}
	return append(out,
		[]byte(`null`), []byte(`5`), []byte(`"in_1"`), []byte(`[]`), []byte(`{}`), []byte(`{`), []byte(`{"id":}`),
		[]byte(`{"id": "in_1", "amount_due": "2000"}`),
		[]byte(`{"id": "in_1", "amount_due": 2000.5}`),
		[]byte(`{"id": null, "customer": null, "customer_details": null, "items": null}`),
		[]byte(`{"amount\u005fdue": 300, "\u0069d": "in_2", "AMOUNT_DUE": 5, "Id": "x"}`),
		[]byte(`{"amount_due": 1, "amount_due": 2, "customer_details": {"email": "a@x"}, "customer_details": {"name": "b"}}`),
		[]byte(`{"customer": {"id": "cus_1", "email": "c@x"}, "charge": {"object": "charge"}, "payment_intent": 7}`),
		[]byte(`{"items": {"data": [{"current_period_end": 1}, {"current_period_end": "x"}]}}`),
		[]byte(`{"status": "paid", "unknown": {"deep": [1, {"id": 2}]}, "id": "in_3"}`),
	)
}

// TestMembersDecodeAsStruct: dataObject's own decode reads what json/v2
// reads of the same struct by reflection, and fails where it fails.
func TestMembersDecodeAsStruct(t *testing.T) {
	for _, raw := range objectSeeds(t) {
		sameDecode(t, raw)
	}
}

func FuzzMembersDecodeAsStruct(f *testing.F) {
	for _, raw := range objectSeeds(f) {
		f.Add(raw)
	}
	f.Fuzz(sameDecode)
}

func sameDecode(t *testing.T, raw []byte) {
	own, plain, ownErr, plainErr := stripe.DecodeObjectBothWays(raw)
	if (ownErr == nil) != (plainErr == nil) {
		t.Fatalf("%s: own decode's error %v, json/v2's %v", raw, ownErr, plainErr)
	}
	if ownErr == nil && !reflect.DeepEqual(own, plain) {
		t.Fatalf("%s: own decode read\n%+v\njson/v2 read\n%+v", raw, own, plain)
	}
}
