package wiring

import (
	"encoding/base64"
	"log/slog"
	"net/url"
	"strings"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// LogValue implements slog.LogValuer: the effective configuration, as
// start-up logs it, with every secret masked (each owner's values as their
// owner masks them).
func (s Setup) LogValue() slog.Value {
	c := s.Config
	attrs := []slog.Attr{
		slog.String("DATABASE_URL", maskURL(c.DatabaseURL)),
		slog.String("DATABASE_POOLER", string(c.DatabasePooler)),
		slog.String("DATABASE_SESSION_URL", maskURL(c.DatabaseSessionURL)),
		slog.String("HTTP_ADDR", c.HTTPAddr),
		slog.String("METRICS_ADDR", c.MetricsAddr),
		slog.String("ADMIN_ADDR", c.AdminAddr),
		slog.String("ADMIN_TOKEN", mask(c.AdminToken)),
		slog.String("ADMIN_HOSTS", strings.Join(c.AdminHosts, ",")),
		slog.Bool("ADMIN_COOKIE_SECURE", c.AdminCookieSecure),
		slog.String("ADMIN_LOCKOUT", c.AdminLockout.String()),
	}
	for _, p := range c.Providers {
		attrs = append(attrs, slog.String(p.Secret.Name, maskList(p.Secret, p.Secrets)))
		for _, v := range p.Vars {
			attrs = append(attrs, slog.String(v.Name, v.Masked(p.Values[v.Name])))
		}
	}
	proxies := make([]string, len(c.TrustedProxies))
	for i, p := range c.TrustedProxies {
		proxies[i] = p.String()
	}
	attrs = append(attrs,
		slog.String("LEASE_DURATION", c.LeaseDuration.String()),
		slog.String("STEP_TIMEOUT", c.StepTimeout.String()),
		slog.String("SMTP_ADDR", c.SMTPAddr),
		slog.String("SMTP_TLS", string(s.SMTPTLS)),
		slog.String("SMTP_USERNAME", c.SMTPUsername),
		slog.String("SMTP_PASSWORD", mask(c.SMTPPassword)),
		slog.String("MAIL_DIR", c.MailDir),
		slog.String("MAIL_FROM", c.MailFrom),
		slog.String("NOTIFY_EMAIL", c.NotifyEmail),
		slog.String("FULFILLMENT_URL", maskURL(c.FulfillmentURL)),
		slog.String("FULFILLMENT_SECRET", fulfillment.MaskKey(s.FulfillmentKey)),
		slog.String("ALERT_WEBHOOK_URL", alerts.MaskURL(s.AlertWebhookURL)),
		slog.String("ALERT_EMAIL", c.AlertEmail),
		slog.Bool("ALLOW_INSECURE_HTTP", c.AllowInsecureHTTP),
		slog.String("SILENCE_ALERT_AFTER", config.SilencesText(c.SilenceAlertAfter)),
		slog.Int64("MAX_BODY_BYTES", c.MaxBodyBytes),
		slog.Int("MAX_INFLIGHT", c.MaxInflight),
		slog.Int64("UNVERIFIED_BODY_BYTES", c.UnverifiedBodyBytes),
		slog.String("BODY_TIMEOUT", c.BodyTimeout.String()),
		slog.Int("MAX_CONNECTIONS", c.MaxConnections),
		slog.String("TRUSTED_PROXIES", strings.Join(proxies, ",")),
		slog.String("REDRIVE_INTERVAL", c.RedriveInterval.String()),
		slog.Int("REDRIVE_PARALLELISM", c.RedriveParallelism),
		slog.Int("MAX_STEP_ATTEMPTS", c.MaxStepAttempts),
		slog.String("RECONCILE_INTERVAL", c.ReconcileInterval.String()),
		slog.String("PUBLIC_URL", c.PublicURL),
		slog.String("ENTITLEMENTS_FILE", s.EntitlementsFile),
		slog.String("API_TOKEN", mask(c.APIToken)),
		slog.String("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String()),
		slog.Int("DB_MAX_CONNS", int(c.DBMaxConns)),
		slog.String("LOG_LEVEL", c.LogLevel.String()),
		slog.String("LOG_FORMAT", string(c.LogFormat)),
		slog.String("MAIL_TEMPLATES_DIR", s.MailTemplatesDir),
		// The billing-portal links' settings: the keys masked, their
		// number shown.
		slog.String("PORTAL_LINK_SECRET", maskKeys(c.Portal.Keys)),
		slog.String("PORTAL_LINK_TTL", c.Portal.TTL.String()),
		slog.Int("PORTAL_LINK_USES", c.Portal.Uses),
		slog.String("PORTAL_RETURN_URL", c.Portal.ReturnURL),
	)
	return slog.GroupValue(attrs...)
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return "****"
}

// maskKeys is what may be shown of a list of keys: "****" for each.
func maskKeys(keys [][]byte) string {
	return strings.TrimSuffix(strings.Repeat("****,", len(keys)), ",")
}

// portalKeys is PORTAL_LINK_SECRET as the fingerprint hashes it.
func portalKeys(keys [][]byte) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = base64.StdEncoding.EncodeToString(k)
	}
	return strings.Join(parts, ",")
}

// maskList shows how many secrets there are and what is safe to log of
// each (a prefix at most).
func maskList(v webhooks.Var, secrets []string) string {
	if len(secrets) == 0 {
		return "(unset)"
	}
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = v.Masked(s)
	}
	return strings.Join(out, ",")
}

// maskURL hides the password of a URL, in its user info or in a
// password= or sslpassword= parameter (both of which pgx accepts).
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		if strings.Contains(raw, "password") {
			return "(masked: contains a password)"
		}
		return raw
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "****")
		}
	}
	q := u.Query()
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "****")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
