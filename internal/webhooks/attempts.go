package webhooks

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// Every attempt of every step is recorded in step_attempts, by the
// statement that completes or gives back its lease (claims.go): when it
// started, how long it took, its outcome, and for a failure the error's
// class, its text (redacted) and the status the other side answered.

// StatusCode returns the status the other side answered in err, when an
// error of its chain says (a method StatusCode() int: the fulfillment API's
// HTTP status, an SMTP server's reply code), else 0.
func StatusCode(err error) int {
	var s interface{ StatusCode() int }
	if errors.As(err, &s) {
		return s.StatusCode()
	}
	return 0
}

// Answered records, from a step kind's Run, the status the other side
// answered a successful attempt with (an API's 201, an SMTP server's 250),
// kept with the attempt beside a failure's (StatusCode), so that operators
// see what the other side said either way. Outside a step, it does
// nothing.
func Answered(ctx context.Context, status int) {
	if a, ok := ctx.Value(answerKey{}).(*atomic.Int32); ok {
		a.Store(int32(status))
	}
}

type answerKey struct{}

// withAnswer is ctx with a place for the status Answered records.
func withAnswer(ctx context.Context) (context.Context, *atomic.Int32) {
	a := new(atomic.Int32)
	return context.WithValue(ctx, answerKey{}, a), a
}

// emailAddress matches what looks like an email address in an error or an
// alert: customer addresses appear in no log line, attempt or alert.
var emailAddress = regexp.MustCompile(`[A-Za-z0-9.!#$%&'*+/=?^_{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+`)

// Redact returns s on one line with every email address replaced by
// "[email]", cut to at most max characters (with "…" where it was cut).
func Redact(s string, max int) string {
	s = emailAddress.ReplaceAllString(s, "[email]")
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// runnerOf is who runs a step in ctx (withRunner), "" for the delivery
// that planned it.
func runnerOf(ctx context.Context) string {
	r, _ := ctx.Value(runnerKey{}).(string)
	return r
}
