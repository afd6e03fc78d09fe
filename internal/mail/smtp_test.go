package mail_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	mailpkg "github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
)

func isPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

func TestSMTPSend(t *testing.T) {
	srv := mailtest.NewServer(t)
	m := sample()
	if err := (mailpkg.SMTPSender{Addr: srv.Addr(), HeloName: "receiver.test"}).Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	if got.MessageID != m.MessageID {
		t.Errorf("Message-ID = %q, want %q", got.MessageID, m.MessageID)
	}
	if got.From != "shop@example.com" || len(got.To) != 1 || got.To[0] != "buyer@example.org" {
		t.Errorf("envelope = %q -> %q", got.From, got.To)
	}
	if got.Username != "" || got.TLS {
		t.Errorf("unexpected AUTH %q / TLS %v", got.Username, got.TLS)
	}
	h, text, html := readParts(t, got.Data)
	if to := h.Get("To"); to != "<buyer@example.org>" {
		t.Errorf("To header = %q", to)
	}
	if !strings.Contains(text, "your order is confirmed") || html != m.HTML {
		t.Errorf("parts: text %q html %q", text, html)
	}
}

func TestSMTPSendStartTLSAuth(t *testing.T) {
	srv := mailtest.NewTLSServer(t)
	s := mailpkg.SMTPSender{Addr: srv.Addr(), Username: "user", Password: "secret", TLS: mailpkg.TLSStartTLS, RootCAs: srv.RootCAs()}
	if err := s.Send(context.Background(), sample()); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	if !got.TLS || got.Username != "user" {
		t.Errorf("TLS = %v, Username = %q; want STARTTLS and AUTH as user", got.TLS, got.Username)
	}
}

func TestSMTPServerFailure(t *testing.T) {
	srv := mailtest.NewServer(t)
	srv.SetFailure(errors.New("try again later"))
	s := mailpkg.SMTPSender{Addr: srv.Addr()}
	err := s.Send(context.Background(), sample())
	if err == nil || !strings.Contains(err.Error(), "451") || !strings.Contains(err.Error(), "try again later") {
		t.Fatalf("err = %v, want the 451 reply", err)
	}
	if isPermanent(err) {
		t.Errorf("451 reported as permanent: %v", err)
	}
	if n := len(srv.Messages()); n != 0 {
		t.Errorf("server stored %d messages during the outage", n)
	}

	// After the outage, the retry goes through with the same Message-ID.
	srv.SetFailure(nil)
	if err := s.Send(context.Background(), sample()); err != nil {
		t.Fatal(err)
	}
	if got := srv.WaitFor(t, 1, 5*time.Second)[0]; got.MessageID != sample().MessageID {
		t.Errorf("Message-ID = %q", got.MessageID)
	}
}

func TestSMTPUnreachable(t *testing.T) {
	// A port that was just closed refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err = mailpkg.SMTPSender{Addr: addr}.Send(ctx, sample())
	if err == nil {
		t.Fatal("Send to a closed port succeeded")
	}
	if isPermanent(err) {
		t.Errorf("connection error reported as permanent: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Send took %v", d)
	}
}

func TestSMTPDeadline(t *testing.T) {
	// A server that accepts connections and never says a word.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()

	for _, tc := range []struct {
		name string
		want error
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline", context.DeadlineExceeded, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}},
		{"cancel", context.Canceled, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			err := mailpkg.SMTPSender{Addr: ln.Addr().String()}.Send(ctx, sample())
			d := time.Since(start)
			if err == nil {
				t.Fatal("Send to a silent server succeeded")
			}
			if !errors.Is(err, tc.want) || isPermanent(err) {
				t.Errorf("err = %v, want a transient error wrapping %v", err, tc.want)
			}
			if d > 2*time.Second {
				t.Errorf("Send returned after %v, deadline was 300ms", d)
			}
		})
	}
}

// TestSMTPTLS: each SMTP_TLS mode against servers with and without TLS.
// starttls never falls back to cleartext, and every mode that encrypts
// verifies the certificate, on the loopback interface too.
func TestSMTPTLS(t *testing.T) {
	for _, c := range []struct {
		name    string
		server  func(testing.TB) *mailtest.Server
		mode    mailpkg.TLSMode
		trust   bool   // RootCAs trusts the server's certificate
		wantTLS bool   // the message went over TLS
		wantErr string // or the send fails, saying so
	}{
		{"StartTLS", mailtest.NewTLSServer, mailpkg.TLSStartTLS, true, true, ""},
		{"StartTLSNotOffered", mailtest.NewServer, mailpkg.TLSStartTLS, true, false, "does not offer STARTTLS"},
		{"StartTLSUntrusted", mailtest.NewTLSServer, mailpkg.TLSStartTLS, false, false, "certificate"},
		{"Implicit", mailtest.NewImplicitTLSServer, mailpkg.TLSImplicit, true, true, ""},
		{"ImplicitUntrusted", mailtest.NewImplicitTLSServer, mailpkg.TLSImplicit, false, false, "certificate"},
		{"NoneIgnoresTheOffer", mailtest.NewTLSServer, mailpkg.TLSNone, false, false, ""},
		{"LoopbackDefaultsToNone", mailtest.NewTLSServer, "", false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := c.server(t)
			s := mailpkg.SMTPSender{Addr: srv.Addr(), TLS: c.mode}
			if c.trust {
				s.RootCAs = srv.RootCAs()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.Send(ctx, sample())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want it to say %q", err, c.wantErr)
				}
				if isPermanent(err) {
					t.Errorf("reported as permanent: %v", err)
				}
				if n := len(srv.Messages()); n != 0 {
					t.Errorf("the server got %d messages", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.WaitFor(t, 1, 5*time.Second)[0]; got.TLS != c.wantTLS {
				t.Errorf("TLS = %v, want %v", got.TLS, c.wantTLS)
			}
		})
	}
}

func TestDefaultTLS(t *testing.T) {
	for addr, want := range map[string]mailpkg.TLSMode{
		"smtp.example.com:587": mailpkg.TLSStartTLS,
		"smtp.example.com:25":  mailpkg.TLSStartTLS,
		"mailpit:1025":         mailpkg.TLSStartTLS,
		"smtp.example.com:465": mailpkg.TLSImplicit,
		"127.0.0.1:465":        mailpkg.TLSImplicit,
		"127.0.0.1:25":         mailpkg.TLSNone,
		"127.0.0.53:1025":      mailpkg.TLSNone,
		"localhost:1025":       mailpkg.TLSNone,
		"LocalHost:1025":       mailpkg.TLSNone,
		"[::1]:25":             mailpkg.TLSNone,
		"localhost.example:25": mailpkg.TLSStartTLS,
		"192.0.2.10:25":        mailpkg.TLSStartTLS,
	} {
		if got := mailpkg.DefaultTLS(addr); got != want {
			t.Errorf("DefaultTLS(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestSMTPRecipientRefused: a 5xx reply to RCPT TO is permanent (but 552,
// a full mailbox, and 4xx are not), and the error, which quotes the
// address as servers do, carries none.
func TestSMTPRecipientRefused(t *testing.T) {
	for _, c := range []struct {
		code      int
		permanent bool
	}{{550, true}, {553, true}, {501, true}, {552, false}, {530, false}, {450, false}} {
		t.Run(strconv.Itoa(c.code), func(t *testing.T) {
			srv := mailtest.NewServer(t)
			srv.RefuseRecipients(c.code, "Recipient address rejected: User unknown")
			err := mailpkg.SMTPSender{Addr: srv.Addr()}.Send(context.Background(), sample())
			if err == nil {
				t.Fatal("Send succeeded")
			}
			if isPermanent(err) != c.permanent || errors.Is(err, mailpkg.ErrRecipientRefused) != c.permanent {
				t.Errorf("permanent = %v, ErrRecipientRefused = %v, want %v: %v", isPermanent(err),
					errors.Is(err, mailpkg.ErrRecipientRefused), c.permanent, err)
			}
			if msg := err.Error(); strings.Contains(msg, "buyer@") || !strings.Contains(msg, "<***@example.org>") ||
				!strings.Contains(msg, strconv.Itoa(c.code)) {
				t.Errorf("error %q: want the reply with the address redacted", msg)
			}
		})
	}
}

// TestKindRunRedacts: the error of an email step, which the processor logs
// and stores as last_error, names no recipient, and stays permanent.
func TestKindRunRedacts(t *testing.T) {
	srv := mailtest.NewServer(t)
	srv.RefuseRecipients(550, "Recipient address rejected: User unknown")
	k := mailpkg.Kind{Sender: mailpkg.SMTPSender{Addr: srv.Addr()}, From: "Shop <shop@example.com>", Domain: "example.com"}
	for _, to := range []string{"Jane.Doe+shop@Example.org", "Jané.Doe@example.org"} {
		payload, err := json.Marshal(mailpkg.Email{Template: "order_confirmation", To: to,
			Data: map[string]any{"OrderID": 1, "AmountCents": 100, "Currency": "usd"}})
		if err != nil {
			t.Fatal(err)
		}
		err = k.Run(context.Background(), "evt_1/email.confirmation", payload)
		if err == nil || !isPermanent(err) {
			t.Fatalf("err = %v, want a permanent refusal", err)
		}
		if msg := strings.ToLower(err.Error()); strings.Contains(msg, "doe") || !strings.Contains(msg, "***@example.org") {
			t.Errorf("error %q: want the recipient redacted", err)
		}
	}

	// An address that does not parse is not quoted either.
	payload, _ := json.Marshal(mailpkg.Email{Template: "order_confirmation", To: "jane.doe@@example.org"})
	err := k.Run(context.Background(), "evt_2/email.confirmation", payload)
	if !errors.Is(err, mailpkg.ErrInvalidMessage) || strings.Contains(err.Error(), "jane") {
		t.Errorf("err = %v, want an invalid message that does not quote the address", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"550 5.1.1 <jane@example.com>: User unknown":       "550 5.1.1 <***@example.com>: User unknown",
		"RCPT TO:<jane.doe+tag@sub.example.co.uk> refused": "RCPT TO:<***@sub.example.co.uk> refused",
		`553 "jane doe"@example.com: bad`:                  "553 ***@example.com: bad",
		"o'brien@example.com, x_y@example.org":             "***@example.com, ***@example.org",
		"mailbox Jané@exämple.de full":                     "mailbox ***@exämple.de full",
		`550 "5.1.1 <jan\u00e9@ex\u00e4mple.de>: unknown"`: `550 "5.1.1 <***@ex\u00e4mple.de>: unknown"`,
		"no address here: 5.1.1":                           "no address here: 5.1.1",
		"already <***@example.com>":                        "already <***@example.com>",
	} {
		if got := mailpkg.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
