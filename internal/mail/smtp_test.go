package mail_test

import (
	"context"
	"errors"
	"net"
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
	s := mailpkg.SMTPSender{Addr: srv.Addr(), Username: "user", Password: "secret"}
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
