package config

import (
	"fmt"
	netmail "net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// loadAlerts reads where operator alerts are emailed (ALERT_EMAIL) and
// SILENCE_ALERT_AFTER, whose sources are those of specs. ALERT_WEBHOOK_URL,
// whose form the alerts package knows, is read by the wiring.
func (c *Config) loadAlerts(l *loader, specs []webhooks.Spec) {
	c.AlertEmail = l.str("ALERT_EMAIL", "")
	if c.AlertEmail != "" {
		if _, err := netmail.ParseAddress(c.AlertEmail); err != nil {
			l.fail("ALERT_EMAIL", fmt.Sprintf("is not an email address: %q", c.AlertEmail))
		}
	}
	c.SilenceAlertAfter = l.silences("SILENCE_ALERT_AFTER", specs)
}

// silenceExample is an example of SILENCE_ALERT_AFTER with the providers'
// own names ("alpha=6h,beta=7d").
func silenceExample(specs []webhooks.Spec) string {
	var parts []string
	for i, s := range specs[:min(2, len(specs))] {
		parts = append(parts, s.Source+"="+[]string{"6h", "7d"}[i])
	}
	return strings.Join(parts, ",")
}

// silences reads SILENCE_ALERT_AFTER: "source=duration" pairs, comma-
// separated, each duration a Go duration or a number of days ("7d"), or
// "off".
func (l *loader) silences(name string, specs []webhooks.Spec) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, pair := range l.list(name) {
		source, v, ok := strings.Cut(pair, "=")
		source, v = strings.TrimSpace(source), strings.TrimSpace(v)
		known := false
		for _, s := range specs {
			known = known || s.Source == source
		}
		switch {
		case !ok:
			l.fail(name, fmt.Sprintf("%q is not source=duration (%s)", pair, silenceExample(specs)))
			continue
		case !known:
			l.fail(name, fmt.Sprintf("%q names no provider", source))
			continue
		case v == "off":
			out[source] = 0
			continue
		}
		d, err := time.ParseDuration(v)
		if days, isDays := strings.CutSuffix(v, "d"); isDays {
			n, nerr := strconv.Atoi(days)
			d, err = time.Duration(n)*24*time.Hour, nerr
		}
		if err != nil || d < time.Minute {
			l.fail(name, fmt.Sprintf("%s=%s: the silence must be a duration of at least 1m (6h, 7d) or off", source, v))
			continue
		}
		out[source] = d
	}
	return out
}

// SilencesText writes SILENCE_ALERT_AFTER back, sorted: what start-up
// logs of it.
func SilencesText(m map[string]time.Duration) string {
	var parts []string
	for source, d := range m {
		v := "off"
		if d > 0 {
			v = d.String()
		}
		parts = append(parts, source+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
