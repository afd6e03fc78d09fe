package console

import (
	"strconv"
	"strings"

	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// attemptView is one attempt of a step as the event page's Attempts table
// shows it: what the other side answered and what went wrong, in words.
type attemptView struct {
	ops.Attempt
	// Answer is the status the other side answered (the API's HTTP
	// status, the SMTP reply code) where one was recorded; "accepted" for
	// a step done without one (a success's own code is not recorded:
	// 2xx, or 409 for a call the API already had; 250 for mail); "–"
	// otherwise, with a note for the cell's title.
	Answer, AnswerNote string
	// Problem names, for a person, the class of a failure the error's
	// text does not name itself ("timed out", "network error"); "" when
	// the text says it all. The class itself (a Go type such as
	// *fulfillment.StatusError) is kept for the cell's title only.
	Problem string
}

// attemptViews prepares a step's attempts for the Attempts table.
func attemptViews(history []ops.Attempt) []attemptView {
	out := make([]attemptView, len(history))
	for i, a := range history {
		v := attemptView{Attempt: a, Answer: "–", Problem: problemOf(a.ErrorClass)}
		switch {
		case a.Status != 0:
			v.Answer = strconv.Itoa(a.Status)
		case a.Outcome == string(webhooks.AttemptDone):
			v.Answer = "accepted"
			v.AnswerNote = "the other side accepted it; its code was not recorded (an attempt made before codes of successes were)"
		case a.Outcome == string(webhooks.AttemptFailed), a.Outcome == string(webhooks.AttemptParked):
			v.AnswerNote = "no answer: the failure came before one"
		}
		out[i] = v
	}
	return out
}

// problems name the error classes that step_attempts records
// (telemetry.ErrorClass: "timeout", "canceled", or the Go type of the
// innermost error of a failure's chain) whose error text does not say
// what happened in a person's words: by the class, or the start of it.
var problems = []struct{ class, problem string }{
	{"timeout", "timed out"},
	{"canceled", "cancelled before it finished"},
	{"*net.DNSError", "host not found"},
	{"*tls.", "TLS error"},
	{"tls.", "TLS error"},
	{"*x509.", "TLS certificate not trusted"},
	{"x509.", "TLS certificate not trusted"},
	{"*net.", "network error"},
	{"*os.SyscallError", "network error"},
	{"syscall.Errno", "network error"},
	{"*url.Error", "network error"},
}

// problemOf is the words for an error class; "" for any other class,
// whose error text says what went wrong (the API's status and answer, the
// SMTP server's reply).
func problemOf(class string) string {
	for _, p := range problems {
		if class == p.class || (strings.HasSuffix(p.class, ".") && strings.HasPrefix(class, p.class)) {
			return p.problem
		}
	}
	return ""
}
