// Package mail builds, renders and sends the receiver's transactional
// e-mails.
//
// A Message is turned into an RFC 5322 message by Message.Bytes and handed
// to a Sender: SMTPSender talks to a real mail server, FileSender writes
// .eml files (the development default). Bodies come from the embedded
// templates via Render.
//
// Senders are called from a step that runs under a lease: they never retry
// internally and honour the context deadline. Every Message carries a
// deterministic Message-ID (see MessageID), so a step that is retried after a
// lost reply sends a message that the receiving side can recognise as a
// duplicate. The errors SMTPSender and the step kind return name no email
// address (Redact): the processor logs them and stores them with the step.
package mail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
)

// Message is one e-mail. From and To are single RFC 5322 addresses
// ("a@example.com" or "Name <a@example.com>"). HTML may be empty, in which
// case the message is plain text only.
type Message struct {
	MessageID string // as produced by MessageID; angle brackets are added if missing
	From      string
	To        string
	Subject   string
	Text      string
	HTML      string
}

// ErrInvalidMessage is matched (errors.Is) by every error caused by a
// malformed Message: a bad address, a CR or LF in a header value, a missing
// Message-ID. Such errors are permanent: sending the same Message again can
// never succeed. They implement interface{ Permanent() bool } returning true.
var ErrInvalidMessage = errors.New("mail: invalid message")

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return "mail: invalid message: " + e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalidMessage }

// Permanent reports that retrying the same message cannot succeed.
func (e *invalidError) Permanent() bool { return true }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// MessageID returns the Message-ID for the e-mail sent by one step of one
// event, such as stepKey "evt_123/email.confirmation": "<" + the first 32 hex
// digits of SHA-256(stepKey) + "@" + domain + ">". It is the same on every
// attempt of that step and differs for every other step or event.
func MessageID(stepKey, domain string) string {
	sum := sha256.Sum256([]byte(stepKey))
	return "<" + hex.EncodeToString(sum[:])[:32] + "@" + domain + ">"
}

// addresses validates and parses From and To.
func (m Message) addresses() (from, to *mail.Address, err error) {
	if from, err = parseAddress("From", m.From); err != nil {
		return nil, nil, err
	}
	if to, err = parseAddress("To", m.To); err != nil {
		return nil, nil, err
	}
	return from, to, nil
}

func parseAddress(field, s string) (*mail.Address, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, invalidf("%s contains CR or LF", field)
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		if field == "To" { // a customer's, which net/mail's errors may quote in part
			return nil, invalidf("To is not a single valid email address")
		}
		return nil, invalidf("%s %q: %v", field, s, err)
	}
	return a, nil
}

// messageID returns the Message-ID header value, validated and bracketed.
func (m Message) messageID() (string, error) {
	id := strings.TrimSpace(m.MessageID)
	switch {
	case id == "":
		return "", invalidf("missing Message-ID")
	case strings.ContainsAny(id, "\r\n"):
		return "", invalidf("Message-ID contains CR or LF")
	case !strings.HasPrefix(id, "<"):
		id = "<" + id + ">"
	}
	return id, nil
}

// Bytes returns m as an RFC 5322 message with CRLF line endings, dated date.
// The body is multipart/alternative with a text/plain and a text/html part
// (text/plain only when HTML is empty), both UTF-8 and quoted-printable. The
// subject is RFC 2047 encoded when it is not plain ASCII.
func (m Message) Bytes(date time.Time) ([]byte, error) {
	from, to, err := m.addresses()
	if err != nil {
		return nil, err
	}
	id, err := m.messageID()
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return nil, invalidf("Subject contains CR or LF")
	}

	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", from.String())
	header("To", to.String())
	header("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	header("Date", date.Format(time.RFC1123Z))
	header("Message-ID", id)
	header("MIME-Version", "1.0")

	if m.HTML == "" {
		header("Content-Type", "text/plain; charset=UTF-8")
		header("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		if err := writeQP(&b, m.Text); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}

	mw := multipart.NewWriter(&b)
	header("Content-Type", mime.FormatMediaType("multipart/alternative",
		map[string]string{"boundary": mw.Boundary()}))
	b.WriteString("\r\n")
	for _, p := range []struct{ typ, body string }{
		{"text/plain; charset=UTF-8", m.Text},
		{"text/html; charset=UTF-8", m.HTML},
	} {
		w, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {p.typ},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		if err := writeQP(w, p.body); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeQP writes s quoted-printable encoded, with CRLF line breaks.
func writeQP(w io.Writer, s string) error {
	qp := quotedprintable.NewWriter(w)
	if _, err := qp.Write([]byte(s)); err != nil {
		return err
	}
	return qp.Close()
}
