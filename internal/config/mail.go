package config

import (
	"fmt"
	"net"
	netmail "net/mail"
	"strings"
)

// loadMail reads where mail goes and from whom: SMTP_ADDR (unset: mail is
// written to MAIL_DIR), SMTP_USERNAME and SMTP_PASSWORD (together),
// MAIL_FROM and NOTIFY_EMAIL. SMTP_TLS and MAIL_TEMPLATES_DIR, whose values
// the mail package reads, are read by the wiring.
func (c *Config) loadMail(l *loader) {
	c.SMTPAddr = l.str("SMTP_ADDR", "")
	c.SMTPUsername = l.str("SMTP_USERNAME", "")
	c.SMTPPassword = l.str("SMTP_PASSWORD", "")
	c.MailDir = l.str("MAIL_DIR", DefaultMailDir)
	c.MailFrom = l.str("MAIL_FROM", DefaultMailFrom)
	c.NotifyEmail = l.str("NOTIFY_EMAIL", "")
	if c.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.SMTPAddr); err != nil {
			l.fail("SMTP_ADDR", fmt.Sprintf("must be host:port, got %q", c.SMTPAddr))
		}
	}
	if (c.SMTPUsername == "") != (c.SMTPPassword == "") {
		l.fail("SMTP_USERNAME", "and SMTP_PASSWORD must be set together")
	}
	if _, err := netmail.ParseAddress(c.MailFrom); err != nil {
		l.fail("MAIL_FROM", fmt.Sprintf("is not an email address: %q", c.MailFrom))
	}
	if c.NotifyEmail != "" {
		if _, err := netmail.ParseAddress(c.NotifyEmail); err != nil {
			l.fail("NOTIFY_EMAIL", fmt.Sprintf("is not an email address: %q", c.NotifyEmail))
		}
	}
}

// MailDomain is the domain of MAIL_FROM, used on the right of Message-IDs.
func (c Config) MailDomain() string {
	if a, err := netmail.ParseAddress(c.MailFrom); err == nil {
		if _, domain, ok := strings.Cut(a.Address, "@"); ok {
			return domain
		}
	}
	return "localhost"
}
