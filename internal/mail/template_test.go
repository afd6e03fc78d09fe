package mail_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mailpkg "github.com/paywebhooks/receiver/internal/mail"
)

// writeTemplates writes files (name, content, name, content, …) into a new
// directory and returns it.
func writeTemplates(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i+1 < len(files); i += 2 {
		if err := os.WriteFile(filepath.Join(dir, files[i]), []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTemplatesDir: a file of MAIL_TEMPLATES_DIR named as a built-in
// template replaces that part of it, in Render and in the emails the step
// kind sends; the other templates, and the other part, stay built in.
func TestTemplatesDir(t *testing.T) {
	dir := writeTemplates(t,
		"order_confirmation.txt.tmpl", `{{define "subject"}}Acme order {{.OrderID}}{{end}}Acme thanks you: {{money .AmountCents .Currency}} for {{.ExternalID}}.`,
		"refund.html.tmpl", `<p>Acme refunded {{money .AmountRefunded .Currency}} to <b>{{.PaymentIntentID}}</b></p>`,
		"README.md", "not a template: ignored",
	)
	if err := os.Mkdir(filepath.Join(dir, "drafts"), 0o755); err != nil {
		t.Fatal(err)
	}
	ts, err := mailpkg.LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ts.Replaced(), ","); got != "order_confirmation.txt.tmpl,refund.html.tmpl" {
		t.Errorf("Replaced() = %s", got)
	}
	data := map[string]any{"OrderID": 42, "AmountCents": 1999, "Currency": "eur", "ExternalID": "cs_1"}
	subject, text, html, err := ts.Render("order_confirmation", data)
	if err != nil {
		t.Fatal(err)
	}
	if subject != "Acme order 42" || text != "Acme thanks you: 19.99 EUR for cs_1.\n" {
		t.Errorf("replaced text part: subject %q, text %q", subject, text)
	}
	if !strings.Contains(html, "Thank you for your order.") {
		t.Errorf("the HTML part is not the built-in one:\n%s", html)
	}
	_, text, html, err = ts.Render("refund", map[string]any{"AmountRefunded": 500, "Currency": "usd", "PaymentIntentID": "<pi_1>"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html, "Acme refunded 5.00 USD to <b>&lt;pi_1&gt;</b>") || !strings.Contains(text, "We have refunded 5.00 USD.") {
		t.Errorf("refund: the HTML part is not the replacement (escaped) or the text not the built-in:\n%s\n%s", html, text)
	}
	if _, builtinText, _, _ := mailpkg.Render("order_confirmation", data); !strings.Contains(builtinText, "Thank you for your order.") {
		t.Errorf("the built-in set changed:\n%s", builtinText)
	}

	// The step kind renders with its Templates.
	out := t.TempDir()
	kind := mailpkg.Kind{Sender: mailpkg.FileSender{Dir: out}, From: "shop@example.test", Domain: "example.test", Templates: ts}
	step := mailpkg.Step("email.confirmation", mailpkg.Email{Template: "order_confirmation", To: "jane@example.com", Data: data})
	payload, err := kind.Prepare(step.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := kind.Run(context.Background(), "evt_1:email.confirmation", payload); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.eml"))
	if len(files) != 1 {
		t.Fatalf("%d messages written, want 1", len(files))
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if h, text, _ := readParts(t, raw); h.Get("Subject") != "Acme order 42" || !strings.Contains(text, "Acme thanks you") {
		t.Errorf("the email sent is not the replacement: subject %q\n%s", h.Get("Subject"), text)
	}
}

// TestTemplatesDirRefused: what cannot be used is refused with the file's
// path and what is wrong, every file at once.
func TestTemplatesDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"ErrParse", "order_confirmation.txt.tmpl", `{{define "subject"}}x{{end}}{{if .OrderID}}unclosed`, "order_confirmation.txt.tmpl:1: unexpected EOF"},
		{"ErrNoSubject", "dunning.txt.tmpl", `Invoice {{.InvoiceID}}`, `has no "subject" block`},
		{"ErrUnknownFunction", "refund.html.tmpl", `<p>{{shout .AmountRefunded}}</p>`, `function "shout" not defined`},
		{"ErrUnknownName", "order_confirmaton.txt.tmpl", `{{define "subject"}}x{{end}}`, "not the name of a built-in template"},
		{"ErrUnknownPart", "order_confirmation.md.tmpl", `x`, "not the name of a built-in template"},
		{"ErrRender", "invoice_receipt.txt.tmpl", `{{define "subject"}}x{{end}}{{.InvoiceID.Number}}`, "can't evaluate field Number"},
		{"ErrHTMLContext", "invoice_receipt.html.tmpl", `<a href="{{.InvoiceID}}>receipt</a>`, "invoice_receipt.html.tmpl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTemplates(t, tc.file, tc.content)
			_, err := mailpkg.LoadTemplates(dir)
			if err == nil {
				t.Fatal("LoadTemplates accepted it")
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, tc.file)) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to name %s and say %q", err, filepath.Join(dir, tc.file), tc.want)
			}
		})
	}
	t.Run("EveryFileAtOnce", func(t *testing.T) {
		dir := writeTemplates(t, "dunning.txt.tmpl", "no subject", "refund.txt.tmpl", "{{if}}")
		_, err := mailpkg.LoadTemplates(dir)
		if err == nil || !strings.Contains(err.Error(), "dunning.txt.tmpl") || !strings.Contains(err.Error(), "refund.txt.tmpl") {
			t.Errorf("error %v, want both files named", err)
		}
	})
	t.Run("ErrNoDirectory", func(t *testing.T) {
		if _, err := mailpkg.LoadTemplates(filepath.Join(t.TempDir(), "missing")); err == nil {
			t.Error("a missing directory was accepted")
		}
	})
}
