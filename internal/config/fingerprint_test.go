package config

import "testing"

// TestDifferencePrintable: a value read from the database is printed to an
// operator's terminal without its control characters (an escape sequence
// written into the receivers table by someone who could).
func TestDifferencePrintable(t *testing.T) {
	d := FingerprintDifference{Var: "SMTP_ADDR", Shell: "a:25", Receiver: "b:25\x1b]0;owned\x07\nMAIL_FROM: forged"}
	if got, want := d.String(), "SMTP_ADDR: this shell: a:25 / receivers: b:25?]0;owned??MAIL_FROM: forged"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
