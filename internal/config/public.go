package config

import "strings"

// loadPublicURL reads PUBLIC_URL, the receiver's public base URL
// (https://pay.example.com), without its trailing slash: what the
// providers' endpoints send to, before the routes, and the base of the
// billing-portal links. The endpoint check (`server endpoints check`, and
// the periodic one) tells this receiver's endpoints from others' by it;
// unset, it cannot, and says so. Its form is the endpoint check's to
// judge: the wiring has endpoints.ParsePublicURL read the value.
func (c *Config) loadPublicURL(l *loader) {
	c.PublicURL = strings.TrimRight(l.str("PUBLIC_URL", ""), "/")
}
