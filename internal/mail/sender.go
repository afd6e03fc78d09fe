package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/telemetry"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Sender delivers one Message.
//
// Send makes a single attempt: it never retries and returns no later than
// ctx's deadline (or soon after ctx is cancelled). A nil error means the
// message was handed over (accepted by the mail server, written to disk).
//
// An error whose chain has a Permanent() bool method returning true (see
// ErrInvalidMessage) means the Message itself is malformed and retrying
// cannot help. Every other error is transient: the caller should give the
// step back and try again later, with the same Message-ID.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// TLSMode is how SMTPSender protects its connection to the server: the
// values of SMTP_TLS.
type TLSMode string

const (
	// TLSStartTLS upgrades the connection with STARTTLS, and refuses to
	// send (a transient error) when the server does not offer it: a relay
	// that stops offering it, or someone on the path who strips the offer,
	// never gets the message in cleartext. The default for a relay that is
	// not on the loopback interface.
	TLSStartTLS TLSMode = "starttls"
	// TLSImplicit speaks TLS from the first byte (SMTPS, "submissions"),
	// the default for port 465.
	TLSImplicit TLSMode = "implicit"
	// TLSNone never encrypts, even when the server offers STARTTLS. The
	// default for a relay on the loopback interface ("localhost",
	// 127.0.0.1, ::1), where the message never leaves the machine.
	TLSNone TLSMode = "none"
)

// TLSModes are the modes, as SMTP_TLS spells them.
var TLSModes = []TLSMode{TLSStartTLS, TLSImplicit, TLSNone}

// DefaultTLS is the mode for a relay at addr ("host:port") when none is
// set: implicit for port 465, none for a loopback host, else starttls.
func DefaultTLS(addr string) TLSMode {
	host, port, _ := net.SplitHostPort(addr)
	switch {
	case port == "465":
		return TLSImplicit
	case IsLoopback(host):
		return TLSNone
	}
	return TLSStartTLS
}

// SMTPSender sends through an SMTP server (a relay or submission port)
// using net/smtp.
//
// TLS says how the connection is protected (DefaultTLS(Addr) when empty).
// With TLS the server's certificate is always verified, against the
// system's roots unless RootCAs is set (tests trust their own server's
// certificate that way; a relay with a private CA belongs in the system's
// trust store, or in SSL_CERT_FILE). It authenticates with AUTH PLAIN only
// when Username is set; net/smtp then refuses to send the password over an
// unencrypted connection to a non-local host.
//
// A 5xx reply to RCPT TO is permanent (its error has a Permanent() method
// returning true, and matches ErrRecipientRefused): that server will not
// take this recipient, and retrying for days cannot change that. 552 is the
// exception RFC 5321 makes (a full mailbox, to be treated as temporary), as
// is 530 (authentication required: the relay's configuration, not the
// recipient). Every other SMTP failure is transient, and so is a server
// that does not offer the STARTTLS that TLSStartTLS requires. A malformed
// Message (ErrInvalidMessage) is permanent.
//
// No error's text carries an email address: SMTP replies often quote the
// recipient ("550 5.1.1 <jane@example.com>: User unknown"), and every
// error Send returns has its addresses redacted (Redact).
type SMTPSender struct {
	Addr     string // host:port
	Username string // empty: no AUTH
	Password string
	HeloName string  // name sent in EHLO/HELO; empty: "localhost"
	TLS      TLSMode // empty: DefaultTLS(Addr)
	// RootCAs verifies the server's certificate; nil: the system's roots.
	RootCAs *x509.CertPool
}

// ErrRecipientRefused is matched (errors.Is) by the error of a message the
// server refused for good at RCPT TO.
var ErrRecipientRefused = errors.New("mail: recipient refused")

// refusedError is a 5xx reply to RCPT TO: permanent.
type refusedError struct{ err error }

func (e *refusedError) Error() string        { return e.err.Error() }
func (e *refusedError) Unwrap() error        { return e.err }
func (e *refusedError) Is(target error) bool { return target == ErrRecipientRefused }

// Permanent reports that sending the same message again cannot succeed.
func (e *refusedError) Permanent() bool { return true }

// permanentAtRcpt reports whether a reply to RCPT TO refuses the recipient
// for good.
func permanentAtRcpt(err error) bool {
	var tp *textproto.Error
	if !errors.As(err, &tp) {
		return false
	}
	return tp.Code >= 500 && tp.Code <= 599 && tp.Code != 552 && tp.Code != 530
}

// errNoStartTLS is the answer of a server that does not offer STARTTLS
// when TLSStartTLS requires it.
var errNoStartTLS = errors.New("the server does not offer STARTTLS, which SMTP_TLS=starttls requires " +
	"(SMTP_TLS=implicit for a relay that speaks TLS from the start, as on port 465)")

// Send implements Sender. While tracing is on, the SMTP dialogue is a
// client span, "smtp.send", with the server's address and an event per
// command; a failure records the command it failed at, never the server's
// reply (it may quote the recipient's address).
func (s SMTPSender) Send(ctx context.Context, m Message) error {
	from, to, err := m.addresses()
	if err != nil {
		return redactErr(err, m.To)
	}
	if err := s.send(ctx, m, from.Address, to.Address); err != nil {
		return redactErr(err, to.Address)
	}
	webhooks.Answered(ctx, 250) // the relay took the message: DATA's reply is 250
	return nil
}

func (s SMTPSender) send(ctx context.Context, m Message, from, to string) (err error) {
	raw, err := m.Bytes(time.Now())
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("mail: smtp address %q: %w", s.Addr, err)
	}
	mode := s.TLS
	if mode == "" {
		mode = DefaultTLS(s.Addr)
	}
	tlsConfig := &tls.Config{ServerName: host, RootCAs: s.RootCAs, MinVersion: tls.VersionTLS12}
	portNum, _ := strconv.Atoi(port)
	ctx, span := telemetry.Start(ctx, "smtp.send", trace.SpanKindClient, semconv.ServerAddress(host), semconv.ServerPort(portNum))
	defer span.End()

	var conn net.Conn
	if mode == TLSImplicit {
		d := tls.Dialer{Config: tlsConfig}
		conn, err = d.DialContext(ctx, "tcp", s.Addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", s.Addr)
	}
	if err != nil {
		if span.IsRecording() {
			span.SetAttributes(smtpCommand.String("connect"))
			telemetry.Failed(span, telemetry.ErrorClass(err))
		}
		return fmt.Errorf("mail: smtp dial %s: %w", s.Addr, err)
	}
	// Bound every read and write by ctx: its deadline now, and an immediate
	// deadline if it is cancelled earlier.
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	step := "greeting"
	defer func() {
		if err == nil {
			return
		}
		if span.IsRecording() {
			span.SetAttributes(smtpCommand.String(step))
			telemetry.Failed(span, telemetry.ErrorClass(err))
		}
		if ctxErr := contextErr(ctx, err); ctxErr != nil {
			err = fmt.Errorf("mail: smtp %s %s: %w (%w)", s.Addr, step, ctxErr, err)
		} else {
			err = fmt.Errorf("mail: smtp %s %s: %w", s.Addr, step, err)
		}
	}()

	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close() // after Quit this is a no-op error; on failure it drops the connection

	if s.HeloName != "" {
		step = "HELO"
		span.AddEvent(step)
		if err := c.Hello(s.HeloName); err != nil {
			return err
		}
	}
	if mode == TLSStartTLS {
		step = "STARTTLS"
		span.AddEvent(step)
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errNoStartTLS
		}
		if err := c.StartTLS(tlsConfig); err != nil {
			return err
		}
	}
	if s.Username != "" {
		step = "AUTH"
		span.AddEvent(step)
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return err
		}
	}
	step = "MAIL FROM"
	span.AddEvent(step)
	if err := c.Mail(from); err != nil {
		return err
	}
	step = "RCPT TO"
	span.AddEvent(step)
	if err := c.Rcpt(to); err != nil {
		if permanentAtRcpt(err) {
			return &refusedError{err: err}
		}
		return err
	}
	step = "DATA"
	span.AddEvent(step)
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	if err := w.Close(); err != nil { // reads the server's verdict on the message
		return err
	}
	// The message has been accepted; a failed QUIT must not make the caller
	// send it again.
	_ = c.Quit()
	return nil
}

// smtpCommand is the attribute of the command an SMTP dialogue failed at.
const smtpCommand = attribute.Key("smtp.command")

// contextErr returns the context error that caused err, if any. The
// connection deadline equals ctx's deadline, so a timeout may be reported a
// moment before ctx itself is done.
func contextErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if dl, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// IsLoopback reports whether host names the loopback interface:
// "localhost" or a loopback address.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// FileSender writes every message to Dir as <message id>.eml, with the
// Message-ID reduced to a safe file name. It is the development default.
// Dir is created if needed; each file is written to a temporary name and
// renamed, so readers never see a partial message. Sending the same
// Message-ID again replaces the file.
type FileSender struct {
	Dir string
}

// Send implements Sender.
func (s FileSender) Send(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := m.Bytes(time.Now())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	name := filepath.Join(s.Dir, fileName(m.MessageID)+".eml")
	f, err := os.CreateTemp(s.Dir, ".tmp-*.eml")
	if err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	_, err = f.Write(raw)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("mail: write %s: %w", name, err)
	}
	return nil
}

// fileName maps a Message-ID to a file name: brackets dropped, and every
// byte other than letters, digits, '.', '-', '_' and '@' replaced by '_'.
func fileName(messageID string) string {
	id := strings.Trim(strings.TrimSpace(messageID), "<>")
	b := []byte(id)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '-', c == '_', c == '@':
		default:
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' {
		return "_" + string(b) // never hidden, never empty
	}
	return string(b)
}
