package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// specs are providers for the tests: internal/providers imports this
// package, so the tests name two providers themselves.
var specs = []webhooks.Spec{stripe.Spec, github.Spec}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func valid() map[string]string {
	return map[string]string{
		"DATABASE_URL":          "postgres://user:hunter2@localhost:5432/receiver",
		"STRIPE_WEBHOOK_SECRET": "whsec_abc" + strings.Repeat("0123456789abcdef", 2) + ", whsec_old" + strings.Repeat("0123456789abcdef", 2),
		"GITHUB_WEBHOOK_SECRET": "github-secret-0123456789abcdef0123",
		"METRICS_ADDR":          "127.0.0.1:9090",
	}
}

func TestLoad(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		e := valid()
		delete(e, "METRICS_ADDR")
		c, err := Load(env(e), specs)
		if err != nil {
			t.Fatal(err)
		}
		if c.HTTPAddr != ":8080" || c.LeaseDuration != 5*time.Minute || c.MaxBodyBytes != 1048576 ||
			c.MailDir != "./var/mail" || c.SMTPAddr != "" || c.FulfillmentURL != "" {
			t.Fatalf("defaults not applied: %+v", c)
		}
		if p, _ := c.Provider("stripe"); len(p.Secrets) != 2 || !strings.HasPrefix(p.Secrets[1], "whsec_old") {
			t.Errorf("secret list = %q, want two trimmed secrets", p.Secrets)
		}
		if c.MaxInflight != 256 || c.MetricsAddr != "" || len(c.TrustedProxies) != 0 || c.StepTimeout != 30*time.Second {
			t.Errorf("defaults of MAX_INFLIGHT, METRICS_ADDR, TRUSTED_PROXIES, STEP_TIMEOUT not applied: %+v", c)
		}
		if c.MailDomain() != "localhost" {
			t.Errorf("MailDomain = %q", c.MailDomain())
		}
		if c.UnverifiedBodyBytes != 32<<20 || c.BodyTimeout != 5*time.Second || c.MaxConnections != 1024 || c.MemoryLimitSet {
			t.Errorf("defaults of UNVERIFIED_BODY_BYTES, BODY_TIMEOUT, MAX_CONNECTIONS, GOMEMLIMIT not applied: %+v", c)
		}
		// docs/http.md states the bounds of the defaults: 976 MiB, 208 of
		// them within reach of requests nobody signed.
		if got := c.MemoryBound(); got != 976<<20 {
			t.Errorf("MemoryBound() of the defaults = %d MiB, docs/http.md says 976", got>>20)
		}
		if got := c.StrangerMemoryBound(); got != 208<<20 {
			t.Errorf("StrangerMemoryBound() of the defaults = %d MiB, docs/http.md says 208", got>>20)
		}
		if c.AdminLockout != 15*time.Minute || c.AdminCookieSecure || len(c.AdminHosts) != 0 {
			t.Errorf("defaults of ADMIN_LOCKOUT, ADMIN_COOKIE_SECURE, ADMIN_HOSTS not applied: %+v", c)
		}
	})
	t.Run("AdminHosts", func(t *testing.T) {
		e := valid()
		e["ADMIN_HOSTS"] = "console.example.com, ops.example.com:8443,10.0.0.5,[fd00::5]:8081"
		e["ADMIN_COOKIE_SECURE"] = "true"
		c, err := Load(env(e), specs)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.AdminHosts) != 4 || c.AdminHosts[1] != "ops.example.com:8443" || !c.AdminCookieSecure {
			t.Errorf("ADMIN_HOSTS = %q, ADMIN_COOKIE_SECURE = %v", c.AdminHosts, c.AdminCookieSecure)
		}
	})

	t.Run("Hosts", func(t *testing.T) {
		for _, u := range []string{
			"postgres://u:p@db-a:5432,db-b:5432/receiver?target_session_attrs=read-write",
			"postgres://u:p@db-a,db-b/receiver?target_session_attrs=primary",
			"host=db-a,db-b dbname=receiver target_session_attrs=read-write",
		} {
			e := valid()
			e["DATABASE_URL"] = u
			if _, err := Load(env(e), specs); err != nil {
				t.Errorf("%s: %v", u, err)
			}
		}
	})
	t.Run("PoolerTransaction", func(t *testing.T) {
		for _, tc := range []struct{ url, want, wantErr string }{
			{"postgres://u:p@pgbouncer:6432/receiver", "postgres://u:p@pgbouncer:6432/receiver?default_query_exec_mode=cache_describe", ""},
			{"postgres://u:p@pgbouncer:6432/receiver?default_query_exec_mode=exec",
				"postgres://u:p@pgbouncer:6432/receiver?default_query_exec_mode=exec", ""},
			{"postgres://u:p@pgbouncer:6432/receiver?sslmode=require&default_query_exec_mode=simple_protocol",
				"postgres://u:p@pgbouncer:6432/receiver?sslmode=require&default_query_exec_mode=simple_protocol", ""},
			{"postgres://u:p@pgbouncer:6432/receiver?default_query_exec_mode=cache_describe",
				"postgres://u:p@pgbouncer:6432/receiver?default_query_exec_mode=cache_describe", ""},
			{"host=pgbouncer port=6432 dbname=receiver", "host=pgbouncer port=6432 dbname=receiver default_query_exec_mode=cache_describe", ""},
			{"postgres://u:p@pgbouncer:6432/receiver?default_query_exec_mode=cache_statement", "",
				"default_query_exec_mode=cache_statement cannot work through a transaction-mode pooler: it prepares named statements"},
			{"postgres://u:p@pgbouncer:6432/receiver?default_query_exec_mode=describe_exec", "",
				"default_query_exec_mode=describe_exec cannot work through a transaction-mode pooler"},
			{"host=pgbouncer default_query_exec_mode=cache_statement", "", "default_query_exec_mode=cache_statement cannot work"},
		} {
			e := valid()
			e["DATABASE_URL"] = tc.url
			e["DATABASE_POOLER"] = "transaction"
			e["DATABASE_SESSION_URL"] = "postgres://u:p@db:5432/receiver"
			c, err := Load(env(e), specs)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s: error %v, want it to say %q", tc.url, err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("%s: %v", tc.url, err)
			case c.DatabaseURL != tc.want || c.DatabasePooler != "transaction" || c.SessionURL() != "postgres://u:p@db:5432/receiver":
				t.Errorf("%s: DATABASE_URL %q, pooler %q, session %q; want %q", tc.url, c.DatabaseURL, c.DatabasePooler, c.SessionURL(), tc.want)
			}
		}
		e := valid()
		e["DATABASE_POOLER"] = "transaction"
		e["DATABASE_SESSION_URL"] = e["DATABASE_URL"]
		if _, err := Load(env(e), specs); err == nil || !strings.Contains(err.Error(), "DATABASE_SESSION_URL is DATABASE_URL") {
			t.Errorf("the pooler as its own session URL: %v", err)
		}
		c, err := Load(env(valid()), specs)
		if err != nil || c.DatabasePooler != "none" || c.SessionURL() != valid()["DATABASE_URL"] || c.DatabaseURL != valid()["DATABASE_URL"] {
			t.Errorf("without DATABASE_POOLER: pooler %q, session %q, url %q, %v", c.DatabasePooler, c.SessionURL(), c.DatabaseURL, err)
		}
	})

	bad := []struct {
		name, key, value, wantMsg string
	}{
		{"ErrNoDatabase", "DATABASE_URL", "", "DATABASE_URL is required"},
		{"ErrBadDatabaseURL", "DATABASE_URL", "mysql://nope:99999999", "DATABASE_URL is not a PostgreSQL"},
		{"ErrStripeSecretPrefix", "STRIPE_WEBHOOK_SECRET", "sk_test_123", "does not start with whsec_"},
		{"ErrStripeSecretShort", "STRIPE_WEBHOOK_SECRET", "whsec_x", "STRIPE_WEBHOOK_SECRET secret 1 is shorter than 38 characters"},
		{"ErrStripeSecretTruncated", "STRIPE_WEBHOOK_SECRET", "whsec_0123456789abcdef0123456789abcde", "STRIPE_WEBHOOK_SECRET secret 1 is shorter than 38 characters"},
		{"ErrLease", "LEASE_DURATION", "five minutes", "LEASE_DURATION must be a Go duration"},
		{"ErrLeaseTooShort", "LEASE_DURATION", "10ms", "LEASE_DURATION must be at least 1s"},
		{"ErrSMTPAddr", "SMTP_ADDR", "mail.example.com", "SMTP_ADDR must be host:port"},
		{"ErrMailFrom", "MAIL_FROM", "not an address", "MAIL_FROM is not an email address"},
		{"ErrNotifyEmail", "NOTIFY_EMAIL", "@@", "NOTIFY_EMAIL is not an email address"},
		{"ErrFulfillmentURL", "FULFILLMENT_URL", "ftp://x", "FULFILLMENT_URL must be an absolute http(s) URL"},
		{"ErrMaxBody", "MAX_BODY_BYTES", "-1", "MAX_BODY_BYTES must be a positive"},
		{"ErrMaxBodyNotNumber", "MAX_BODY_BYTES", "1MB", "MAX_BODY_BYTES must be a whole number"},
		{"ErrHTTPAddr", "HTTP_ADDR", "8080", "HTTP_ADDR must be host:port"},
		{"ErrLogLevel", "LOG_LEVEL", "loud", "LOG_LEVEL must be"},
		{"ErrGitHubSecretShort", "GITHUB_WEBHOOK_SECRET", "github-secret15", "GITHUB_WEBHOOK_SECRET secret 1 is shorter than 16 characters"},
		{"ErrGitHubSecondSecretShort", "GITHUB_WEBHOOK_SECRET", "github-secret-0123456789abcdef0123,short", "GITHUB_WEBHOOK_SECRET secret 2 is shorter than 16"},
		{"ErrMaxInflight", "MAX_INFLIGHT", "0", "MAX_INFLIGHT must be at least 1"},
		{"ErrTrustedProxies", "TRUSTED_PROXIES", "10.0.0.0/8, proxy.example.com", "TRUSTED_PROXIES \"proxy.example.com\" is not a CIDR"},
		{"ErrMetricsAddr", "METRICS_ADDR", "9090", "METRICS_ADDR must be host:port"},
		{"ErrStepTimeoutOverLease", "STEP_TIMEOUT", "5m", "LEASE_DURATION 5m0s is not longer than the step timeout (5m0s)"},
		{"ErrAdminWithoutToken", "ADMIN_ADDR", "127.0.0.1:9000", "ADMIN_TOKEN must be set"},
		{"ErrRedriveParallelism", "REDRIVE_PARALLELISM", "0", "REDRIVE_PARALLELISM must be between 1 and 256"},
		{"ErrUnverifiedBelowMaxBody", "UNVERIFIED_BODY_BYTES", "65536", "UNVERIFIED_BODY_BYTES must be at least MAX_BODY_BYTES (1048576)"},
		{"ErrBodyTimeout", "BODY_TIMEOUT", "10ms", "BODY_TIMEOUT must be between 100ms and 1m"},
		{"ErrBodyTimeoutNotDuration", "BODY_TIMEOUT", "5", "BODY_TIMEOUT must be a Go duration"},
		{"ErrMaxConnections", "MAX_CONNECTIONS", "8", "MAX_CONNECTIONS must be at least 16"},
		{"ErrAdminHosts", "ADMIN_HOSTS", "console.example.com, https://console.example.com", `ADMIN_HOSTS "https://console.example.com" is not a host`},
		{"ErrAdminHostsPort", "ADMIN_HOSTS", "console.example.com:0", `ADMIN_HOSTS "console.example.com:0" is not a host`},
		{"ErrAdminHostsWildcard", "ADMIN_HOSTS", "*.example.com", `ADMIN_HOSTS "*.example.com" is not a host`},
		{"ErrAdminCookieSecure", "ADMIN_COOKIE_SECURE", "yes", "ADMIN_COOKIE_SECURE must be true or false"},
		{"ErrAdminLockout", "ADMIN_LOCKOUT", "100ms", "ADMIN_LOCKOUT must be from 1s to 24h"},
		{"ErrDatabasePooler", "DATABASE_POOLER", "session", `DATABASE_POOLER must be none or transaction, got "session"`},
		{"ErrPoolerWithoutSessionURL", "DATABASE_POOLER", "transaction", "DATABASE_SESSION_URL is required with DATABASE_POOLER=transaction"},
		{"ErrBadSessionURL", "DATABASE_SESSION_URL", "mysql://nope:99999999", "DATABASE_SESSION_URL is not a PostgreSQL"},
		{"ErrHostsWithoutTargetSessionAttrs", "DATABASE_URL", "postgres://u:p@db-a:5432,db-b:5432/receiver",
			"DATABASE_URL names 2 hosts: add target_session_attrs=read-write"},
		{"ErrHostsReadOnly", "DATABASE_URL", "postgres://u:p@db-a,db-b/receiver?target_session_attrs=prefer-standby",
			`DATABASE_URL names 2 hosts: add target_session_attrs=read-write, so that only a primary is written to and a promoted standby is followed (got "prefer-standby")`},
		{"ErrFulfillmentHTTP", "FULFILLMENT_URL", "http://fulfil.example.com:8000", "FULFILLMENT_URL is http:// to fulfil.example.com:8000, off this machine"},
		{"ErrAllowInsecureHTTP", "ALLOW_INSECURE_HTTP", "yes", `ALLOW_INSECURE_HTTP must be true or false, got "yes"`},
		{"ErrAlertEmail", "ALERT_EMAIL", "oncall", "ALERT_EMAIL is not an email address"},
		{"ErrSilenceSource", "SILENCE_ALERT_AFTER", "stripe=6h,paypal=1h", `SILENCE_ALERT_AFTER "paypal" names no provider`},
		{"ErrSilenceDuration", "SILENCE_ALERT_AFTER", "stripe=soon", "SILENCE_ALERT_AFTER stripe=soon: the silence must be"},
		{"ErrSilenceShort", "SILENCE_ALERT_AFTER", "stripe=10s", "at least 1m"},
		{"ErrSilencePair", "SILENCE_ALERT_AFTER", "6h", `SILENCE_ALERT_AFTER "6h" is not source=duration`},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			e := valid()
			e[c.key] = c.value
			_, err := Load(env(e), specs)
			if err == nil || !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("error = %v, want it to say %q", err, c.wantMsg)
			}
		})
	}

	t.Run("GOMEMLIMIT", func(t *testing.T) {
		e := valid()
		e["GOMEMLIMIT"] = "400MiB"
		c, err := Load(env(e), specs)
		if err != nil || !c.MemoryLimitSet {
			t.Errorf("with GOMEMLIMIT set: MemoryLimitSet %v, err %v; want true: the runtime's limit is the operator's", c.MemoryLimitSet, err)
		}
	})

	t.Run("EveryProblemAtOnce", func(t *testing.T) {
		_, err := Load(env(map[string]string{"LEASE_DURATION": "x", "SMTP_ADDR": "nope"}), specs)
		for _, name := range []string{"DATABASE_URL", "LEASE_DURATION", "SMTP_ADDR"} {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("error %v does not name %s", err, name)
			}
		}
	})
}

// TestLeaseShorterThanAStep: a lease that a live worker could outlive (a
// step's timeout plus the time to record its result) is refused at
// start-up, with the figures.
func TestLeaseShorterThanAStep(t *testing.T) {
	e := valid()
	e["LEASE_DURATION"], e["STEP_TIMEOUT"] = "20s", "18s"
	_, err := Load(env(e), specs)
	if err == nil || !strings.Contains(err.Error(), "plus the time allowed to record a completion (5s)") {
		t.Fatalf("error = %v, want the lease refused with the figures", err)
	}
	e["STEP_TIMEOUT"] = "10s"
	if _, err := Load(env(e), specs); err != nil {
		t.Fatalf("a 20s lease with a 10s step timeout: %v", err)
	}
}

// TestSecretLength: a GitHub secret under 16 characters is refused (see
// TestLoad), one under 32 accepted with a warning that names the variable
// and which secret of the list, never the value.
func TestSecretLength(t *testing.T) {
	for _, c := range []struct {
		name, secrets string
		want          []Warning
	}{
		{"Long", "github-secret-0123456789abcdef0123", nil},
		{"Exactly32", strings.Repeat("s", 32), nil},
		{"Short", "github-secret-16", []Warning{{"GITHUB_WEBHOOK_SECRET", "secret 1 is shorter than 32 characters: replace it with a longer random one"}}},
		{"SecondShort", "github-secret-0123456789abcdef0123, " + strings.Repeat("s", 31),
			[]Warning{{"GITHUB_WEBHOOK_SECRET", "secret 2 is shorter than 32 characters: replace it with a longer random one"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := valid()
			e["GITHUB_WEBHOOK_SECRET"] = c.secrets
			cfg, err := Load(env(e), specs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Warnings, c.want) {
				t.Errorf("Warnings = %q, want %q", cfg.Warnings, c.want)
			}
		})
	}
}

// TestDevelopmentValuesRefused: a webhook secret or ADMIN_TOKEN that says
// "development", in any case, is refused, without quoting it, unless the
// development tool runs the process (PAYWEBHOOKS_DEV=1).
func TestDevelopmentValuesRefused(t *testing.T) {
	for _, c := range []struct{ key, value string }{
		{"STRIPE_WEBHOOK_SECRET", "whsec_compose_development_only_0123456789ab"},
		{"STRIPE_WEBHOOK_SECRET", "whsec_real_0123456789abcdef0123456789abcdef, whsec_DEVELOPMENT_0123456789abcdef0123456"},
		{"GITHUB_WEBHOOK_SECRET", "compose-Development-only-0123456789abcdef"},
		{"ADMIN_TOKEN", "compose-development-token"},
	} {
		t.Run(c.key+"/"+c.value, func(t *testing.T) {
			e := valid()
			e[c.key] = c.value
			e["ADMIN_ADDR"] = "127.0.0.1:9000"
			if c.key != "ADMIN_TOKEN" {
				e["ADMIN_TOKEN"] = "admin-token-0123456789"
			}
			_, err := Load(env(e), specs)
			if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), `contains "development"`) {
				t.Fatalf("error = %v, want %s refused for saying development", err, c.key)
			}
			if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.value)) {
				t.Errorf("error quotes the value: %v", err)
			}

			e[DevEnv] = "1"
			if _, err := Load(env(e), specs); err != nil {
				t.Errorf("with %s=1: %v", DevEnv, err)
			}
		})
	}
}

func TestTrustedProxies(t *testing.T) {
	e := valid()
	e["TRUSTED_PROXIES"] = "10.1.0.0/16, 192.0.2.7"
	c, err := Load(env(e), specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.TrustedProxies) != 2 || c.TrustedProxies[0].String() != "10.1.0.0/16" || c.TrustedProxies[1].String() != "192.0.2.7/32" {
		t.Fatalf("TrustedProxies = %v", c.TrustedProxies)
	}
}

// TestStripeSecretsAsIssued: the signing secrets Stripe issues start: an
// endpoint's (whsec_ and 32 letters and digits) and `stripe listen`'s
// (whsec_ and 64 hex digits); a shorter one does not (whsec_x, above).
func TestStripeSecretsAsIssued(t *testing.T) {
	for _, v := range []string{
		"whsec_" + strings.Repeat("aB3", 10) + "xY",
		"whsec_" + strings.Repeat("0123456789abcdef", 4),
	} {
		e := valid()
		e["STRIPE_WEBHOOK_SECRET"] = v
		if c, err := Load(env(e), specs); err != nil || len(c.Warnings) != 0 {
			t.Errorf("a secret of %d characters: %v, warnings %v", len(v), err, c.Warnings)
		}
	}
}

// TestMetricsOnThePublicListener: with METRICS_ADDR unset, /metrics is
// served on HTTP_ADDR, and start-up warns unless HTTP_ADDR is a loopback
// address; with METRICS_ADDR set it does not.
func TestMetricsOnThePublicListener(t *testing.T) {
	for _, c := range []struct {
		http, metrics string
		warns         bool
	}{
		{"", "", true}, // :8080, every interface
		{"0.0.0.0:8080", "", true},
		{"10.0.0.5:8080", "", true},
		{"[::]:8080", "", true},
		{"127.0.0.1:8080", "", false},
		{"localhost:8080", "", false},
		{"[::1]:8080", "", false},
		{"", "127.0.0.1:9090", false},
		{"", "10.0.0.5:9090", false},
	} {
		e := valid()
		e["HTTP_ADDR"], e["METRICS_ADDR"] = c.http, c.metrics
		cfg, err := Load(env(e), specs)
		if err != nil {
			t.Fatal(err)
		}
		var warned bool
		for _, w := range cfg.Warnings {
			if w.Var == "METRICS_ADDR" {
				warned = true
				if !strings.Contains(w.Message, "/metrics is served on HTTP_ADDR") {
					t.Errorf("the warning: %s", w.Message)
				}
			}
		}
		if warned != c.warns {
			t.Errorf("HTTP_ADDR %q, METRICS_ADDR %q: warned %v, want %v", c.http, c.metrics, warned, c.warns)
		}
	}
}
