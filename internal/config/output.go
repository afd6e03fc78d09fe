package config

import (
	"fmt"
	"os"

	"github.com/paywebhooks/receiver/internal/mail"
)

// LogFormat is how the receiver writes its log lines (LOG_FORMAT).
type LogFormat string

const (
	// LogJSON writes a JSON object per line: what log pipelines read, and
	// the default.
	LogJSON LogFormat = "json"
	// LogText writes key=value lines (slog's TextHandler) for a person at
	// a terminal: the default under the development tool (DevEnv).
	LogText LogFormat = "text"
)

// loadOutput reads what the receiver writes for people: LOG_FORMAT (text
// by default under the development tool, else json) and
// MAIL_TEMPLATES_DIR, whose templates are parsed and tried here so that a
// broken one stops start-up with its file name.
func (c *Config) loadOutput(l *loader, dev bool) {
	def := LogJSON
	if dev {
		def = LogText
	}
	switch f := LogFormat(l.str("LOG_FORMAT", string(def))); f {
	case LogJSON, LogText:
		c.LogFormat = f
	default:
		l.fail("LOG_FORMAT", fmt.Sprintf("must be json or text, got %q", f))
	}

	c.MailTemplatesDir = l.str("MAIL_TEMPLATES_DIR", "")
	if c.MailTemplatesDir == "" {
		return
	}
	if fi, err := os.Stat(c.MailTemplatesDir); err != nil || !fi.IsDir() {
		l.fail("MAIL_TEMPLATES_DIR", fmt.Sprintf("is not a directory: %q", c.MailTemplatesDir))
		return
	}
	ts, err := mail.LoadTemplates(c.MailTemplatesDir)
	if err != nil {
		l.fail("MAIL_TEMPLATES_DIR", "holds a template that cannot be used:\n    "+indent(err.Error()))
		return
	}
	c.MailTemplates = ts
}

// indent puts the lines after the first of a multi-line message under it.
func indent(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		if s[i] == '\n' {
			out = append(out, "    "...)
		}
	}
	return string(out)
}
