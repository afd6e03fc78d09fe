package wiring

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/config"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// fpEnv is a receiver's whole environment, each secret of a realistic
// length.
func fpEnv() map[string]string {
	return map[string]string{
		"DATABASE_URL":          "postgres://receiver:db-password-7f3a@db:5432/receiver",
		"STRIPE_WEBHOOK_SECRET": "whsec_Kq8vN2xL5pR7tY9wB3mC6fH1jD4gS0aZ",
		"GITHUB_WEBHOOK_SECRET": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
		"STRIPE_API_KEY":        "rk_live_51NqA8bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1vW2xY3z",
		"SMTP_ADDR":             "smtp.example.com:587",
		"SMTP_USERNAME":         "receiver",
		"SMTP_PASSWORD":         "smtp-password-hunter2",
		"MAIL_FROM":             "Shop <shop@example.com>",
		"NOTIFY_EMAIL":          "owner@example.com",
		"FULFILLMENT_URL":       "https://api.example.com/v1",
		"FULFILLMENT_SECRET":    "whsec_" + base64.StdEncoding.EncodeToString([]byte("fingerprint test key, 32 bytes!!")),
		"ALERT_WEBHOOK_URL":     "https://hooks.slack.com/services/T0000/B0000/XXXXslacktokenXXXX",
		"ALERT_EMAIL":           "ops@example.com",
	}
}

func fingerprint(t *testing.T, kv map[string]string, salt string) config.Fingerprint {
	t.Helper()
	c, err := Load(func(k string) string { return kv[k] }, []webhooks.Spec{stripe.Spec, github.Spec})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Fingerprint([]byte(salt))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const salt1, salt2 = "salt of database one, 32 bytes!!", "salt of database two, 32 bytes!!"

// TestFingerprintHoldsNoSecret: what a receiver records of its
// configuration holds no secret, nor a password, nor the token of a Slack
// webhook URL: only what start-up logs, and keyed hashes.
func TestFingerprintHoldsNoSecret(t *testing.T) {
	e := fpEnv()
	b, err := json.Marshal(fingerprint(t, e, salt1))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fingerprint: %s", b)
	key := strings.TrimPrefix(e["FULFILLMENT_SECRET"], "whsec_")
	for _, secret := range []string{e["STRIPE_WEBHOOK_SECRET"], e["GITHUB_WEBHOOK_SECRET"], e["STRIPE_API_KEY"], e["SMTP_PASSWORD"],
		e["FULFILLMENT_SECRET"], key, "fingerprint test key", "slacktoken", "db-password", salt1} {
		for _, part := range []string{secret, secret[len(secret)-8:]} {
			if strings.Contains(string(b), part) {
				t.Errorf("the fingerprint holds %q", part)
			}
		}
	}
	for _, shown := range []string{`"SMTP_ADDR","shown":"smtp.example.com:587"`, `"FULFILLMENT_SECRET","shown":"whsec_****"`,
		`"STRIPE_API_KEY","shown":"rk_****"`, `"ALERT_WEBHOOK_URL","shown":"https://hooks.slack.com/****"`} {
		if !strings.Contains(string(b), shown) {
			t.Errorf("the fingerprint lacks %s", shown)
		}
	}
	if strings.Contains(string(b), "SMTP_PASSWORD") {
		t.Error("the fingerprint records SMTP_PASSWORD, which people choose")
	}
}

// TestFingerprintDiff: the same environment gives the same fingerprint; a
// difference is named with both values when they are not secret, as
// "differs" when they are, and a secret's hash depends on the database's
// salt.
func TestFingerprintDiff(t *testing.T) {
	receiver := fingerprint(t, fpEnv(), salt1)
	if d := fingerprint(t, fpEnv(), salt1).Diff(receiver); len(d) != 0 {
		t.Fatalf("the same environment differs: %v", d)
	}
	hash := func(f config.Fingerprint, name string) string {
		for _, it := range f.Items {
			if it.Var == name {
				return it.Hash
			}
		}
		return ""
	}
	if h1, h2 := hash(receiver, "STRIPE_API_KEY"), hash(fingerprint(t, fpEnv(), salt2), "STRIPE_API_KEY"); h1 == "" || h1 == h2 {
		t.Errorf("STRIPE_API_KEY's hash under two salts: %q, %q; want two hashes", h1, h2)
	}

	shell := fpEnv()
	shell["SMTP_ADDR"] = "localhost:2525"
	delete(shell, "FULFILLMENT_SECRET")
	shell["STRIPE_API_KEY"] = "rk_live_51NqA8bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1vW2xY3Z"
	shell["ALERT_WEBHOOK_URL"] = "https://hooks.slack.com/services/T0000/B0000/YYYYslacktokenYYYY"
	shell["STRIPE_WEBHOOK_SECRET"] += ",whsec_Kq8vN2xL5pR7tY9wB3mC6fH1jD4gS0aY"
	var got []string
	for _, d := range fingerprint(t, shell, salt1).Diff(receiver) {
		got = append(got, d.String())
		if d.VerifyOnly != (d.Var == "STRIPE_WEBHOOK_SECRET") {
			t.Errorf("%s: VerifyOnly %t", d.Var, d.VerifyOnly)
		}
	}
	want := []string{
		"SMTP_ADDR: this shell: localhost:2525 / receivers: smtp.example.com:587",
		"SMTP_TLS: this shell: none / receivers: starttls",
		"FULFILLMENT_SECRET: this shell: unset / receivers: whsec_****",
		"ALERT_WEBHOOK_URL: differs in the credentials it carries (https://hooks.slack.com/****)",
		"STRIPE_WEBHOOK_SECRET: this shell: whsec_****,whsec_**** / receivers: whsec_****",
		"STRIPE_API_KEY: differs (a secret: neither value is shown)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFingerprintMailDir: without SMTP_ADDR mail goes to MAIL_DIR, which
// is compared as the absolute path it is; with it, MAIL_DIR is not used.
func TestFingerprintMailDir(t *testing.T) {
	e := fpEnv()
	delete(e, "SMTP_ADDR")
	delete(e, "SMTP_USERNAME")
	delete(e, "SMTP_PASSWORD")
	e["MAIL_DIR"] = "/var/lib/receiver/mail"
	receiver := fingerprint(t, e, salt1)
	e["MAIL_DIR"] = "./var/mail"
	d := fingerprint(t, e, salt1).Diff(receiver)
	if len(d) != 1 || d[0].Var != "MAIL_DIR" || !strings.HasPrefix(d[0].Shell, "/") || !strings.HasSuffix(d[0].Shell, "/var/mail") {
		t.Errorf("differences %v; want MAIL_DIR, this shell's as an absolute path", d)
	}
	if _, err := (Setup{}).Fingerprint([]byte("short")); err == nil {
		t.Error("a salt of 5 bytes was taken")
	}
}
