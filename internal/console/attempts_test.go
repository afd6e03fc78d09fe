package console

import "testing"

// TestProblemOf: the error classes whose text does not say what happened
// are named in words; the others leave it to their text.
func TestProblemOf(t *testing.T) {
	for class, want := range map[string]string{
		"timeout": "timed out", "canceled": "cancelled before it finished", "syscall.Errno": "network error",
		"*net.OpError": "network error", "*net.DNSError": "host not found", "*tls.CertificateVerificationError": "TLS error",
		"x509.UnknownAuthorityError": "TLS certificate not trusted", "*url.Error": "network error",
		"*fulfillment.StatusError": "", "*mail.replyError": "", "*errors.errorString": "", "": "",
	} {
		if got := problemOf(class); got != want {
			t.Errorf("problemOf(%q) = %q, want %q", class, got, want)
		}
	}
}

// TestPlural: "1 event", "2 events", whatever the integer's type.
func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    any
		want string
	}{{0, "0 events"}, {1, "1 event"}, {int64(1), "1 event"}, {2, "2 events"}, {int64(11), "11 events"}} {
		if got := plural(c.n, "event", "events"); got != c.want {
			t.Errorf("plural(%v) = %q, want %q", c.n, got, c.want)
		}
	}
}
