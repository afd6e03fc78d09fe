package config

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Portal is the configuration of the billing-portal links in customer
// emails (internal/portal): GET /billing/portal?t=… on HTTP_ADDR, the link
// PUBLIC_URL + that, a sealed token naming the customer.
type Portal struct {
	// Keys (PORTAL_LINK_SECRET: comma-separated, each the standard base64
	// of 32 random bytes) seal and open the links' tokens: the first seals
	// new links, every one opens them, so that a key is rotated by putting
	// a new one first and dropping the old one once the links it sealed
	// have expired. Nil: no links, and the route is not mounted.
	Keys [][]byte
	// TTL (PORTAL_LINK_TTL) is how long a link opens the portal after its
	// email was sent; Uses (PORTAL_LINK_USES) how often one link does.
	TTL  time.Duration
	Uses int
	// ReturnURL (PORTAL_RETURN_URL) is where the portal's "return" link
	// goes (Stripe's return_url, Polar's); "": the provider's default.
	ReturnURL string
}

// Defaults of the portal links.
const (
	DefaultPortalLinkTTL  = 30 * 24 * time.Hour
	DefaultPortalLinkUses = 10
	// PortalKeyBytes is the size of each PORTAL_LINK_SECRET key (AES-256).
	PortalKeyBytes = 32
)

// loadPortal reads PORTAL_LINK_SECRET, PORTAL_LINK_TTL, PORTAL_LINK_USES and
// PORTAL_RETURN_URL.
func (c *Config) loadPortal(l *loader) {
	p := Portal{TTL: l.duration("PORTAL_LINK_TTL", DefaultPortalLinkTTL), Uses: DefaultPortalLinkUses,
		ReturnURL: l.str("PORTAL_RETURN_URL", "")}
	for i, s := range l.list("PORTAL_LINK_SECRET") {
		key, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(key) != PortalKeyBytes {
			l.fail("PORTAL_LINK_SECRET", fmt.Sprintf("key %d is not the base64 of %d bytes (make one with: openssl rand -base64 32)",
				i+1, PortalKeyBytes))
			continue
		}
		p.Keys = append(p.Keys, key)
	}
	if v := l.str("PORTAL_LINK_USES", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			l.fail("PORTAL_LINK_USES", fmt.Sprintf("must be a whole number from 1 to 1000, got %q", v))
		}
		p.Uses = n
	}
	if p.TTL < time.Minute || p.TTL > 366*24*time.Hour {
		l.fail("PORTAL_LINK_TTL", "must be from 1m to 8784h (a year)")
	}
	if p.ReturnURL != "" {
		u, err := url.Parse(p.ReturnURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname()))) {
			l.fail("PORTAL_RETURN_URL", "must be an absolute https:// URL (http:// only to a loopback host)")
		}
	}
	if len(p.Keys) > 0 && c.PublicURL == "" {
		c.Warn("PORTAL_LINK_SECRET", "is set but PUBLIC_URL is not: the emails cannot link to the billing portal, and "+
			"GET /billing/portal is not mounted")
	}
	c.Portal = p
}
