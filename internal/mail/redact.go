package mail

import (
	"strconv"
	"strings"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Redact returns s with the local part of every email address in it
// replaced by "***" (webhooks.RedactAddresses): "550 5.1.1
// <jane@example.com>: User unknown" becomes "550 5.1.1 <***@example.com>:
// User unknown". It is idempotent.
func Redact(s string) string { return webhooks.RedactAddresses(s) }

// redact is Redact, after replacing every occurrence of the known address
// addr (in any case), whatever its form: a malformed address that the
// pattern would miss ("jane@", "jane") is still removed.
func redact(s, addr string) string {
	if addr = strings.TrimSpace(addr); addr != "" {
		s = replaceFold(s, addr, redactedAddress(addr))
		if q := strconv.Quote(addr); q[1:len(q)-1] != addr { // as a quoted reply escapes it
			s = replaceFold(s, q[1:len(q)-1], redactedAddress(addr))
		}
	}
	return Redact(s)
}

// redactedAddress is what replaces a known address: its domain kept when
// it has one.
func redactedAddress(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return "***" + addr[i:]
	}
	return "***"
}

// replaceFold replaces every occurrence of old in s, compared without
// regard to case, by repl.
func replaceFold(s, old, repl string) string {
	lower, lowerOld := strings.ToLower(s), strings.ToLower(old)
	if len(lower) != len(s) || len(lowerOld) != len(old) {
		return strings.ReplaceAll(s, old, repl) // a case change altered lengths: exact matches only
	}
	var b strings.Builder
	for {
		i := strings.Index(lower, lowerOld)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(repl)
		s, lower = s[i+len(old):], lower[i+len(old):]
	}
}

// redactedError is an error whose text has its email addresses redacted.
// Its chain is kept, so errors.Is and errors.As (Permanent, a context's
// error) see what it wraps.
type redactedError struct {
	err  error
	text string
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr returns err with its text redacted as redact does, or nil.
func redactErr(err error, addr string) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	red := redact(text, addr)
	if red == text {
		return err
	}
	return &redactedError{err: err, text: red}
}
