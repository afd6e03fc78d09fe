package webhooks_test

import (
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestKeySafe: a sender's id is a claim key as sent when it is 1 to 100
// letters, digits, '_', '-' or '.'; a '/' (which separates an event's key
// from its steps'), a LIKE wildcard, a space or anything longer is not.
func TestKeySafe(t *testing.T) {
	for id, want := range map[string]bool{
		"msg_2b7f1e0a5c93": true, "0c6f8b8e-3f1a-4d52-9b7e-6c1d2a9f4e01": true, "evt_01.a": true,
		strings.Repeat("a", 100): true, strings.Repeat("a", 101): false, "": false,
		"msg_1/email.confirmation": false, "msg%": false, "msg_1 ": false, "évt": false,
	} {
		if got := webhooks.KeySafe(id); got != want {
			t.Errorf("KeySafe(%q) = %v, want %v", id, got, want)
		}
	}
}
