package mail_test

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mailpkg "github.com/paywebhooks/receiver/internal/mail"
)

// readParts parses raw and returns its headers and its text and html bodies
// (decoded).
func readParts(t *testing.T, raw []byte) (mail.Header, string, string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("ReadMessage: %v\n%s", err, raw)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	var text, html string
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("NextPart: %v", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		switch ct := p.Header.Get("Content-Type"); ct {
		case "text/plain; charset=UTF-8":
			text = string(b)
		case "text/html; charset=UTF-8":
			html = string(b)
		default:
			t.Errorf("unexpected part %q", ct)
		}
	}
	return msg.Header, text, html
}

func sample() mailpkg.Message {
	return mailpkg.Message{
		MessageID: mailpkg.MessageID("evt_123/email.confirmation", "example.com"),
		From:      "Shop <shop@example.com>",
		To:        "buyer@example.org",
		Subject:   "Bestellung bestätigt – 30,00 €",
		Text:      "Héllo,\nyour order is confirmed. A long line " + strings.Repeat("x", 100) + "\n",
		HTML:      "<p>Héllo</p>",
	}
}

func TestBytes(t *testing.T) {
	m := sample()
	date := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	raw, err := m.Bytes(date)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\r\n") {
		if strings.Contains(line, "\n") {
			t.Fatalf("bare LF in %q", line)
		}
		if len(line) > 998 {
			t.Fatalf("line longer than 998: %q", line)
		}
	}
	h, text, html := readParts(t, raw)
	if got := h.Get("Message-ID"); got != m.MessageID {
		t.Errorf("Message-ID = %q, want %q", got, m.MessageID)
	}
	if got := h.Get("MIME-Version"); got != "1.0" {
		t.Errorf("MIME-Version = %q", got)
	}
	if strings.Contains(h.Get("Subject"), "ä") {
		t.Errorf("Subject not encoded: %q", h.Get("Subject"))
	}
	var dec mime.WordDecoder
	if got, err := dec.DecodeHeader(h.Get("Subject")); err != nil || got != m.Subject {
		t.Errorf("Subject = %q, %v; want %q", got, err, m.Subject)
	}
	if d, err := h.Date(); err != nil || !d.Equal(date) {
		t.Errorf("Date = %v, %v", d, err)
	}
	if from, err := h.AddressList("From"); err != nil || from[0].Address != "shop@example.com" || from[0].Name != "Shop" {
		t.Errorf("From = %v, %v", from, err)
	}
	if to, err := h.AddressList("To"); err != nil || to[0].Address != "buyer@example.org" {
		t.Errorf("To = %v, %v", to, err)
	}
	if want := strings.ReplaceAll(m.Text, "\n", "\r\n"); text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	if html != m.HTML {
		t.Errorf("html = %q, want %q", html, m.HTML)
	}

	// Plain ASCII subjects are left alone.
	m.Subject = "Order confirmed"
	raw, _ = m.Bytes(date)
	if h, _, _ := readParts(t, raw); h.Get("Subject") != "Order confirmed" {
		t.Errorf("Subject = %q", h.Get("Subject"))
	}
}

func TestBytesInvalid(t *testing.T) {
	for name, mod := range map[string]func(*mailpkg.Message){
		"bad from":        func(m *mailpkg.Message) { m.From = "not an address" },
		"bad to":          func(m *mailpkg.Message) { m.To = "" },
		"CRLF in to":      func(m *mailpkg.Message) { m.To = "a@example.org\r\nBcc: x@example.org" },
		"CRLF in subject": func(m *mailpkg.Message) { m.Subject = "hi\r\nBcc: x@example.org" },
		"LF in subject":   func(m *mailpkg.Message) { m.Subject = "hi\nthere" },
		"CR in id":        func(m *mailpkg.Message) { m.MessageID = "<a@b>\rX: y" },
		"no id":           func(m *mailpkg.Message) { m.MessageID = "" },
	} {
		t.Run(name, func(t *testing.T) {
			m := sample()
			mod(&m)
			_, err := m.Bytes(time.Now())
			if !errors.Is(err, mailpkg.ErrInvalidMessage) {
				t.Fatalf("err = %v, want ErrInvalidMessage", err)
			}
			var p interface{ Permanent() bool }
			if !errors.As(err, &p) || !p.Permanent() {
				t.Errorf("err %v is not permanent", err)
			}
			// Senders refuse it the same way, without touching the network.
			err = mailpkg.SMTPSender{Addr: "127.0.0.1:1"}.Send(context.Background(), m)
			if !errors.Is(err, mailpkg.ErrInvalidMessage) {
				t.Errorf("SMTPSender: err = %v, want ErrInvalidMessage", err)
			}
		})
	}
}

func TestMessageID(t *testing.T) {
	a := mailpkg.MessageID("evt_123/email.confirmation", "example.com")
	if a != mailpkg.MessageID("evt_123/email.confirmation", "example.com") {
		t.Error("MessageID is not deterministic")
	}
	if !strings.HasPrefix(a, "<") || !strings.HasSuffix(a, "@example.com>") || len(a) != len("<@example.com>")+32 {
		t.Errorf("MessageID = %q", a)
	}
	if _, err := mail.ParseAddress(strings.Trim(a, "<>")); err != nil {
		t.Errorf("MessageID %q is not addr-spec shaped: %v", a, err)
	}
	seen := map[string]string{a: "evt_123/email.confirmation"}
	for _, k := range []string{"evt_124/email.confirmation", "evt_123/email.receipt", "evt_123/email.confirmation2", ""} {
		id := mailpkg.MessageID(k, "example.com")
		if prev, dup := seen[id]; dup {
			t.Errorf("MessageID(%q) == MessageID(%q) = %q", k, prev, id)
		}
		seen[id] = k
	}
}

// sampleData holds the data each template is rendered with in production.
var sampleData = map[string]map[string]any{
	"order_confirmation":    {"OrderID": int64(42), "AmountCents": int64(3000), "Currency": "usd", "ExternalID": "cs_test_1"},
	"payment_failed":        {"OrderID": int64(42), "AmountCents": int64(3000), "Currency": "usd", "ExternalID": "cs_test_1"},
	"invoice_receipt":       {"InvoiceID": "in_1", "AmountPaid": int64(1999), "Currency": "eur"},
	"dunning":               {"InvoiceID": "in_1", "AmountDue": int64(1999), "Currency": "eur", "AttemptCount": int64(2)},
	"refund":                {"PaymentIntentID": "pi_1", "AmountRefunded": float64(500), "TotalRefunded": float64(700), "AmountCents": float64(10000), "Currency": "gbp"},
	"trial_ending":          {"SubscriptionID": "sub_1", "TrialEnd": "3 March 2026"},
	"subscription_ended":    {"SubscriptionID": "sub_1", "PeriodEnd": "3 March 2026"},
	"dispute_opened":        {"DisputeID": "dp_1", "AmountCents": float64(4200), "Currency": "usd", "Reason": "fraudulent", "DueBy": "9 March 2026 23:59 UTC", "PaymentIntentID": "pi_1"},
	"marketplace_welcome":   {"Account": "octocat", "Plan": "Pro", "AmountCents": 900, "Currency": "USD", "BillingCycle": "monthly"},
	"marketplace_cancelled": {"Account": "octocat", "Plan": "Pro"},
	"sponsorship_created":   {"Sponsor": "octocat", "Tier": "Gold", "AmountCents": 2500, "Currency": "USD"},
	"sponsorship_cancelled": {"Sponsor": "octocat", "Tier": "Gold"},
}

// sampleWant is text each template must contain, in subject, text and html.
var sampleWant = map[string][]string{
	"order_confirmation":    {"42", "30.00 USD", "cs_test_1"},
	"payment_failed":        {"42", "30.00 USD"},
	"invoice_receipt":       {"in_1", "19.99 EUR"},
	"dunning":               {"in_1", "19.99 EUR", "2"},
	"refund":                {"pi_1", "We have refunded 5.00 GBP", "Refunded so far: 7.00 GBP of 100.00 GBP"},
	"trial_ending":          {"sub_1", "3 March 2026"},
	"subscription_ended":    {"sub_1", "3 March 2026"},
	"dispute_opened":        {"dp_1", "42.00 USD", "fraudulent", "9 March 2026 23:59 UTC", "pi_1"},
	"marketplace_welcome":   {"octocat", "Pro", "9.00 USD", "monthly"},
	"marketplace_cancelled": {"octocat", "Pro"},
	"sponsorship_created":   {"octocat", "Gold", "25.00 USD"},
	"sponsorship_cancelled": {"octocat", "Gold"},
}

func TestRender(t *testing.T) {
	for name, data := range sampleData {
		t.Run(name, func(t *testing.T) {
			subject, text, html, err := mailpkg.Render(name, data)
			if err != nil {
				t.Fatal(err)
			}
			if subject == "" || strings.ContainsAny(subject, "\r\n") {
				t.Errorf("subject = %q", subject)
			}
			all := subject + "\n" + text
			for _, want := range sampleWant[name] {
				if !strings.Contains(all, want) {
					t.Errorf("subject+text lacks %q:\n%s", want, all)
				}
				if !strings.Contains(html, want) {
					t.Errorf("html lacks %q:\n%s", want, html)
				}
			}
			// The rendered parts make a valid message.
			m := sample()
			m.Subject, m.Text, m.HTML = subject, text, html
			if _, err := m.Bytes(time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRenderMissingKeys(t *testing.T) {
	for name := range sampleData {
		for _, data := range []map[string]any{nil, {}, {"Currency": nil}} {
			subject, text, html, err := mailpkg.Render(name, data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if all := subject + text + html; strings.Contains(all, "no value") || strings.Contains(all, "<nil>") {
				t.Errorf("%s %v: rendered a placeholder:\n%s\n%s\n%s", name, data, subject, text, html)
			}
			if subject == "" {
				t.Errorf("%s: empty subject", name)
			}
		}
	}
}

// TestRenderNoEmptyLabel: a payment that belongs to no order yet (Paddle's
// transaction.payment_failed of a subscription renewal, say) is rendered
// without an "Order:" line whose value is empty, in text and in HTML.
func TestRenderNoEmptyLabel(t *testing.T) {
	data := map[string]any{"AmountCents": int64(3000), "Currency": "usd", "ExternalID": "txn_1"}
	subject, text, html, err := mailpkg.Render("payment_failed", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text, "\n") {
		if l := strings.TrimSpace(line); strings.HasSuffix(l, ":") {
			t.Errorf("text has a label with no value: %q\n%s", line, text)
		}
	}
	if strings.Contains(html, "<td></td>") {
		t.Errorf("html has an empty cell:\n%s", html)
	}
	if strings.Contains(subject, "#") {
		t.Errorf("subject names an order: %q", subject)
	}
}

func TestRenderEscapesHTML(t *testing.T) {
	_, text, html, err := mailpkg.Render("marketplace_cancelled", map[string]any{"Account": "<b>x</b>", "Plan": "Pro"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, "<b>") || !strings.Contains(html, "&lt;b&gt;") {
		t.Errorf("html not escaped: %s", html)
	}
	if !strings.Contains(text, "<b>x</b>") {
		t.Errorf("text escaped: %s", text)
	}
}

func TestRenderMoney(t *testing.T) {
	for _, tc := range []struct {
		amount   any
		currency any
		want     string
	}{
		{int64(3000), "usd", "30.00 USD"},
		{5, "EUR", "0.05 EUR"},
		{float64(123456), "eur", "1234.56 EUR"},
		{int64(-250), "usd", "-2.50 USD"},
		{"1500", "usd", "15.00 USD"},
		{int64(500), "jpy", "500 JPY"},
		{int64(3000), nil, "30.00"},
		{nil, "usd", ""},
	} {
		_, text, _, err := mailpkg.Render("invoice_receipt", map[string]any{"AmountPaid": tc.amount, "Currency": tc.currency})
		if err != nil {
			t.Fatal(err)
		}
		if line := lineWith(text, "Paid:"); strings.TrimSpace(strings.TrimPrefix(line, "Paid:")) != tc.want {
			t.Errorf("money(%v, %v): line %q, want %q", tc.amount, tc.currency, line, tc.want)
		}
	}
}

func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestRenderUnknown(t *testing.T) {
	if _, _, _, err := mailpkg.Render("no_such_template", nil); err == nil {
		t.Fatal("Render of an unknown template succeeded")
	}
}

func TestFileSender(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "outbox") // created by Send
	s := mailpkg.FileSender{Dir: dir}
	m := sample()
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	// Sending again (a retried step) replaces the file.
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("outbox has %d entries, want 1: %v", len(entries), entries)
	}
	name := entries[0].Name()
	if want := strings.Trim(m.MessageID, "<>") + ".eml"; name != want {
		t.Errorf("file %q, want %q", name, want)
	}
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	h, text, _ := readParts(t, raw)
	if h.Get("Message-ID") != m.MessageID || !strings.Contains(text, "confirmed") {
		t.Errorf("unexpected message: %s", raw)
	}

	// A hostile Message-ID cannot escape Dir.
	m.MessageID = "<../../etc/passwd@x>"
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "_.._.._etc_passwd@x.eml")); err != nil {
		t.Errorf("sanitised file missing: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Send(ctx, sample()); !errors.Is(err, context.Canceled) {
		t.Errorf("Send with cancelled ctx: %v", err)
	}
}
