package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogFormat: JSON lines by default, text under the development tool,
// either when LOG_FORMAT says so, anything else refused.
func TestLogFormat(t *testing.T) {
	for _, c := range []struct {
		dev, value string
		want       LogFormat
		err        string
	}{
		{want: LogJSON},
		{dev: "1", want: LogText},
		{value: "text", want: LogText},
		{dev: "1", value: "json", want: LogJSON},
		{value: "yaml", err: `LOG_FORMAT must be json or text, got "yaml"`},
	} {
		e := valid()
		e[DevEnv], e["LOG_FORMAT"] = c.dev, c.value
		cfg, err := Load(env(e), specs)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("dev %q LOG_FORMAT %q: error %v, want %q", c.dev, c.value, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("dev %q LOG_FORMAT %q: %v", c.dev, c.value, err)
		case c.err == "" && cfg.LogFormat != c.want:
			t.Errorf("dev %q LOG_FORMAT %q: %q, want %q", c.dev, c.value, cfg.LogFormat, c.want)
		}
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
