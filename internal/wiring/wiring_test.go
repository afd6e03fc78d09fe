package wiring

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/mail"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// specs are providers for the tests: internal/providers is the commands'
// to import, so the tests name two providers themselves.
var specs = []webhooks.Spec{stripe.Spec, github.Spec}

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// valid is an environment Load takes without a warning.
func valid() map[string]string {
	secret := strings.Repeat("0123456789abcdef", 2)
	return map[string]string{"DATABASE_URL": "postgres://user:hunter2@localhost:5432/receiver", "METRICS_ADDR": "127.0.0.1:9090",
		"STRIPE_WEBHOOK_SECRET": "whsec_abc" + secret + ", whsec_old" + secret, "GITHUB_WEBHOOK_SECRET": "github-secret-0123456789abcdef0123"}
}

// TestOwnedValuesRefused: a value whose owner refuses it stops start-up
// with the configuration's other problems, naming its variable.
func TestOwnedValuesRefused(t *testing.T) {
	for _, c := range []struct {
		name, key, value, wantMsg string
	}{
		{"ErrAlertWebhookHTTP", "ALERT_WEBHOOK_URL", "http://hooks.example.com/x", "ALERT_WEBHOOK_URL is http:// to hooks.example.com, off this machine"},
		{"ErrAlertWebhookRelative", "ALERT_WEBHOOK_URL", "hooks.slack.com/services/x", "ALERT_WEBHOOK_URL must be an absolute URL"},
		{"ErrSMTPTLSWithoutAddr", "SMTP_TLS", "starttls", "SMTP_TLS is set, but SMTP_ADDR is not"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := valid()
			e[c.key] = c.value
			e["LEASE_DURATION"] = "x" // a problem of config's own, reported with the owner's
			_, err := Load(env(e), specs)
			if err == nil || !strings.Contains(err.Error(), c.wantMsg) || !strings.Contains(err.Error(), "LEASE_DURATION") {
				t.Fatalf("error = %v, want it to say %q, and LEASE_DURATION's problem", err, c.wantMsg)
			}
		})
	}
}

func TestLogValueMasksSecrets(t *testing.T) {
	e := valid()
	e["SMTP_USERNAME"], e["SMTP_PASSWORD"] = "mailer", "smtp-pass-123"
	e["FULFILLMENT_URL"] = "https://shop:api-token-456@fulfil.example.com"
	e["DATABASE_POOLER"], e["DATABASE_SESSION_URL"] = "transaction", "postgres://user:sess-pass-789@db-direct:5432/receiver"
	c, err := Load(env(e), specs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("config", "config", c)
	out := b.String()
	for _, secret := range []string{"hunter2", "whsec_abc", "whsec_old", "github-secret-0123", "smtp-pass-123", "api-token-456", "sess-pass-789"} {
		if strings.Contains(out, secret) {
			t.Errorf("log line contains secret %q: %s", secret, out)
		}
	}
	for _, shown := range []string{"localhost:5432", "whsec_****", "LEASE_DURATION", "5m0s", "db-direct:5432",
		`"DATABASE_POOLER":"transaction"`, "default_query_exec_mode=cache_describe"} {
		if !strings.Contains(out, shown) {
			t.Errorf("log line lacks %q: %s", shown, out)
		}
	}
}

// TestSMTPTLS: SMTP_TLS defaults by the relay's address (implicit on 465,
// none on the loopback interface, else starttls), takes what is said, and
// cleartext off the loopback interface is warned of, or refused when it
// would carry SMTP_PASSWORD.
func TestSMTPTLS(t *testing.T) {
	for _, c := range []struct {
		name, addr, tls, user string
		want                  mail.TLSMode
		warn                  bool
		wantErr               string
	}{
		{"DefaultRelay", "smtp.example.com:587", "", "", mail.TLSStartTLS, false, ""},
		{"Default465", "smtp.example.com:465", "", "", mail.TLSImplicit, false, ""},
		{"DefaultLoopback", "127.0.0.1:1025", "", "", mail.TLSNone, false, ""},
		{"DefaultLocalhostWithAuth", "localhost:1025", "", "mailer", mail.TLSNone, false, ""},
		{"Said", "127.0.0.1:1025", "starttls", "", mail.TLSStartTLS, false, ""},
		{"ImplicitSaid", "smtp.example.com:2465", "implicit", "mailer", mail.TLSImplicit, false, ""},
		{"NoneOffLoopback", "mailpit:1025", "none", "", mail.TLSNone, true, ""},
		{"ErrNoneWithPassword", "smtp.example.com:587", "none", "mailer", "", false, "would send SMTP_PASSWORD in cleartext"},
		{"ErrUnknown", "smtp.example.com:587", "tls", "", "", false, "SMTP_TLS must be starttls, implicit or none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := valid()
			e["SMTP_ADDR"], e["SMTP_TLS"] = c.addr, c.tls
			if c.user != "" {
				e["SMTP_USERNAME"], e["SMTP_PASSWORD"] = c.user, "smtp-pass-123"
			}
			cfg, err := Load(env(e), specs)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want it to say %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SMTPTLS != c.want {
				t.Errorf("SMTPTLS = %q, want %q", cfg.SMTPTLS, c.want)
			}
			if warned := slices.ContainsFunc(cfg.Warnings, func(w config.Warning) bool { return w.Var == "SMTP_TLS" }); warned != c.warn {
				t.Errorf("warnings %q, want a SMTP_TLS warning: %v", cfg.Warnings, c.warn)
			}
		})
	}
}

func TestMaskURL(t *testing.T) {
	for _, c := range []struct{ in, secret string }{
		{"postgres://app:s3cret@db/receiver", "s3cret"},
		{"postgres://app@db/receiver?password=s3cret&sslmode=require", "s3cret"},
		{"postgres://db/receiver?sslpassword=s3cret", "s3cret"},
		{"host=db user=app password=s3cret", "s3cret"},
	} {
		if out := maskURL(c.in); strings.Contains(out, c.secret) {
			t.Errorf("maskURL(%q) = %q, shows the password", c.in, out)
		}
	}
	if out := maskURL("postgres://app@db:5432/receiver?sslmode=disable"); out != "postgres://app@db:5432/receiver?sslmode=disable" {
		t.Errorf("a URL without a password changed: %q", out)
	}
}

func TestAlerts(t *testing.T) {
	e := valid()
	e["ALERT_WEBHOOK_URL"] = "https://hooks.slack.com/services/T000/B000/s3cr3tp4th"
	e["ALERT_EMAIL"] = "Oncall <oncall@ops.example>"
	e["SILENCE_ALERT_AFTER"] = "stripe=6h, github=7d"
	c, err := Load(env(e), specs)
	if err != nil {
		t.Fatal(err)
	}
	if c.SilenceAlertAfter["stripe"] != 6*time.Hour || c.SilenceAlertAfter["github"] != 7*24*time.Hour {
		t.Errorf("SILENCE_ALERT_AFTER = %v", c.SilenceAlertAfter)
	}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("config", "config", c)
	if out := b.String(); strings.Contains(out, "s3cr3tp4th") || !strings.Contains(out, "hooks.slack.com") {
		t.Errorf("the webhook URL's path is a secret, its host is not: %s", out)
	}
	e["ALERT_WEBHOOK_URL"] = "http://127.0.0.1:9000/hook" // loopback: http allowed
	e["SILENCE_ALERT_AFTER"] = "github=off"
	if c, err = Load(env(e), specs); err != nil {
		t.Fatal(err)
	}
	if d, ok := c.SilenceAlertAfter["github"]; !ok || d != 0 {
		t.Errorf("github=off: %v %v, want 0 (never)", d, ok)
	}
}

// TestCleartextURLs: FULFILLMENT_URL and ALERT_WEBHOOK_URL may be http://
// to a loopback host only, unless ALLOW_INSECURE_HTTP=true, which start-up
// then warns of; the refusal names the variable and the way out, never a
// password or the webhook's path.
func TestCleartextURLs(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:9000", "http://127.8.0.1", "http://[::1]:9000", "http://localhost:9000", "http://LOCALHOST", "https://fulfil.example.com"} {
		e := valid()
		e["FULFILLMENT_URL"], e["ALERT_WEBHOOK_URL"] = u, u+"/hook"
		c, err := Load(env(e), specs)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if len(c.Warnings) != 0 {
			t.Errorf("%s: warnings %v", u, c.Warnings)
		}
	}
	e := valid()
	e["FULFILLMENT_URL"] = "http://shop:p4ssw0rd@fulfil.internal:8000"
	e["ALERT_WEBHOOK_URL"] = "http://chat.internal/hooks/s3cr3tp4th"
	_, err := Load(env(e), specs)
	for _, want := range []string{"FULFILLMENT_URL is http:// to fulfil.internal:8000", "ALERT_WEBHOOK_URL is http:// to chat.internal", "ALLOW_INSECURE_HTTP=true"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to say %q", err, want)
		}
	}
	if err != nil && (strings.Contains(err.Error(), "p4ssw0rd") || strings.Contains(err.Error(), "s3cr3tp4th")) {
		t.Errorf("the refusal quotes a secret: %v", err)
	}
	e["ALLOW_INSECURE_HTTP"] = "true"
	c, err := Load(env(e), specs)
	if err != nil {
		t.Fatalf("with ALLOW_INSECURE_HTTP=true: %v", err)
	}
	var warned []string
	for _, w := range c.Warnings {
		warned = append(warned, w.Var)
		if strings.Contains(w.Message, "p4ssw0rd") || strings.Contains(w.Message, "s3cr3tp4th") {
			t.Errorf("the warning quotes a secret: %s", w.Message)
		}
	}
	if !slices.Equal(warned, []string{"FULFILLMENT_URL", "ALERT_WEBHOOK_URL"}) {
		t.Errorf("warnings for %v; want FULFILLMENT_URL and ALERT_WEBHOOK_URL", warned)
	}
}

// TestMailTemplatesDir: the directory's templates are loaded with the
// configuration, and one that cannot be used stops it, naming the file.
func TestMailTemplatesDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dunning.txt.tmpl")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := valid()
	e["MAIL_TEMPLATES_DIR"] = dir
	write(`{{define "subject"}}Acme: invoice {{.InvoiceID}} unpaid{{end}}Pay {{money .AmountDue .Currency}}, please.`)
	cfg, err := Load(env(e), specs)
	if err != nil {
		t.Fatal(err)
	}
	if subject, _, _, err := cfg.MailTemplates.Render("dunning", map[string]any{"InvoiceID": "in_1"}); err != nil || subject != "Acme: invoice in_1 unpaid" {
		t.Errorf("subject %q, %v: not the directory's template", subject, err)
	}
	if !strings.Contains(cfg.LogValue().String(), "MAIL_TEMPLATES_DIR="+dir) {
		t.Errorf("the configuration logged does not name the directory: %s", cfg.LogValue())
	}

	write(`{{define "subject"}}Acme{{end}}{{range .Lines}}`)
	_, err = Load(env(e), specs)
	if err == nil || !strings.Contains(err.Error(), "MAIL_TEMPLATES_DIR") || !strings.Contains(err.Error(), file) {
		t.Errorf("a broken template: error %v, want MAIL_TEMPLATES_DIR and %s named", err, file)
	}

	e["MAIL_TEMPLATES_DIR"] = file
	if _, err := Load(env(e), specs); err == nil || !strings.Contains(err.Error(), "MAIL_TEMPLATES_DIR is not a directory") {
		t.Errorf("a file for a directory: error %v", err)
	}

	delete(e, "MAIL_TEMPLATES_DIR")
	if cfg, err := Load(env(e), specs); err != nil || cfg.MailTemplates != nil {
		t.Errorf("unset: templates %v, %v; want the built-in ones (nil)", cfg.MailTemplates, err)
	}
}
