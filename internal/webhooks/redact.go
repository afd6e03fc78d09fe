package webhooks

import (
	"regexp"
	"strings"
)

// addressLocalPart matches the local part of an email address and its
// "@", in free text: a quoted string, or a run of characters up to one
// that may not border an address in a reply (space, brackets, '"', ",",
// ";", ":"). A backslash belongs to the run: Go quotes an SMTP reply in its
// error (textproto.Error), escaping "jané" as "jan\u00e9".
var addressLocalPart = regexp.MustCompile(`(?:"[^"\r\n]*"|[^\s<>()\[\],;:"@]+)@`)

// RedactAddresses returns s with the local part of every email address in
// it replaced by "***": "550 5.1.1 <jane@example.com>: User unknown"
// becomes "550 5.1.1 <***@example.com>: User unknown". No customer's
// address may reach a log line or a stored error, and what steps answer
// (an SMTP reply, a fulfillment API's error body) often quotes one; the
// domain is kept, which is what an operator needs to tell one relay's
// refusals from another's. It is idempotent.
func RedactAddresses(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return addressLocalPart.ReplaceAllLiteralString(s, "***@")
}

// redactedError is an error whose text has its addresses redacted, and
// which still is what it wraps for errors.Is and errors.As (a permanent
// failure, an answer's status).
type redactedError struct {
	err  error
	text string
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// redactError returns err with RedactAddresses applied to its text: what
// the processor logs and records (last_error, an attempt's error) of a
// step that failed, whatever its kind, a fork's included.
func redactError(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if red := RedactAddresses(text); red != text {
		return &redactedError{err: err, text: red}
	}
	return err
}
