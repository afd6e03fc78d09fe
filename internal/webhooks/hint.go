package webhooks

import (
	"errors"
	"log/slog"
)

// hintAttr is the "hint" of a rejection's log line: s.WrongSecretHint when
// err says the signature matches no configured secret although the
// timestamp it signs is fresh, else the empty attribute, which a handler
// leaves out.
func (s Spec) hintAttr(err error) slog.Attr {
	var rej *RejectError
	if s.WrongSecretHint == "" || !errors.As(err, &rej) || rej.Reason != ReasonNoValidSignature || rej.Timestamp != SignedFresh {
		return slog.Attr{}
	}
	return slog.String("hint", s.WrongSecretHint)
}
