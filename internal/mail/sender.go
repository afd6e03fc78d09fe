package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/telemetry"
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

// SMTPSender sends through an SMTP server (a relay or submission port)
// using net/smtp.
//
// It uses STARTTLS whenever the server offers it, verifying the server's
// certificate unless the server host is a loopback address or "localhost".
// It authenticates with AUTH PLAIN only when Username is set; net/smtp then
// refuses to send the password over an unencrypted connection to a
// non-local host.
//
// All SMTP failures are reported as transient, including 5xx replies: a
// rejected recipient or an over-quota mailbox is returned as an error for
// the caller to retry or give up on by its own policy. Only a malformed
// Message (ErrInvalidMessage) is permanent.
type SMTPSender struct {
	Addr     string // host:port
	Username string // empty: no AUTH
	Password string
	HeloName string // name sent in EHLO/HELO; empty: "localhost"
}

// Send implements Sender. While tracing is on, the SMTP dialogue is a
// client span, "smtp.send", with the server's address and an event per
// command; a failure records the command it failed at, never the server's
// reply (it may quote the recipient's address).
func (s SMTPSender) Send(ctx context.Context, m Message) (err error) {
	from, to, err := m.addresses()
	if err != nil {
		return err
	}
	raw, err := m.Bytes(time.Now())
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("mail: smtp address %q: %w", s.Addr, err)
	}
	portNum, _ := strconv.Atoi(port)
	ctx, span := telemetry.Start(ctx, "smtp.send", trace.SpanKindClient, semconv.ServerAddress(host), semconv.ServerPort(portNum))
	defer span.End()

	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
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
	if ok, _ := c.Extension("STARTTLS"); ok {
		step = "STARTTLS"
		span.AddEvent(step)
		if err := c.StartTLS(&tls.Config{
			ServerName:         host,
			InsecureSkipVerify: isLoopback(host), // test and local relays use self-signed certificates
		}); err != nil {
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
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	step = "RCPT TO"
	span.AddEvent(step)
	if err := c.Rcpt(to.Address); err != nil {
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

func isLoopback(host string) bool {
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
