package config

import "github.com/paywebhooks/receiver/internal/endpoints"

// loadPublicURL reads PUBLIC_URL, the receiver's public base URL
// (https://pay.example.com): what the providers' endpoints send to, before
// the routes. The endpoint check (`server endpoints check`, and the
// periodic one) tells this receiver's endpoints from others' by it; unset,
// it cannot, and says so.
func (c *Config) loadPublicURL(l *loader) {
	v := l.str("PUBLIC_URL", "")
	if v == "" {
		return
	}
	u, err := endpoints.ParsePublicURL(v)
	if err != nil {
		l.errs = append(l.errs, err)
		return
	}
	c.PublicURL = u
}
