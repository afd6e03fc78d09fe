package wiring

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestFulfillmentSecret: FULFILLMENT_SECRET is a Standard Webhooks secret
// whose key is 24 to 64 bytes, checked at start-up, its key kept for the
// client and never logged.
func TestFulfillmentSecret(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // 24 bytes
	e := valid()
	e["FULFILLMENT_SECRET"] = " " + secret + " "
	c, err := Load(env(e), specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.FulfillmentKey) != 24 {
		t.Errorf("FulfillmentKey = %x, want the 24 bytes of the secret", c.FulfillmentKey)
	}
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Info("config", "config", c)
	if strings.Contains(b.String(), secret[6:]) || !strings.Contains(b.String(), `"FULFILLMENT_SECRET":"whsec_****"`) {
		t.Errorf("logged: %s", b.String())
	}

	delete(e, "FULFILLMENT_SECRET")
	if c, err := Load(env(e), specs); err != nil || c.FulfillmentKey != nil {
		t.Errorf("unset: key %x, %v", c.FulfillmentKey, err)
	}

	for _, bad := range []struct{ value, want string }{
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "does not start with whsec_"},
		{"whsec_not base64!", "not standard base64"},
		{"whsec_c2hvcnQ=", "a key of 5 bytes"},
		{"whsec_" + strings.Repeat("AAAA", 22), "a key of 66 bytes"},
		{"whsec_4fTzWQm0A2kV8rXc6PbN1yLh9JdGu3EsKoMZiq7e0vRtY", "not standard base64"},
	} {
		e["FULFILLMENT_SECRET"] = bad.value
		_, err := Load(env(e), specs)
		if err == nil || !strings.Contains(err.Error(), "FULFILLMENT_SECRET") || !strings.Contains(err.Error(), bad.want) ||
			!strings.Contains(err.Error(), "openssl rand -base64 32") || strings.Contains(err.Error(), bad.value[6:]) {
			t.Errorf("%q: %v, want FULFILLMENT_SECRET refused: %s, without repeating it", bad.value, err, bad.want)
		}
	}
}
