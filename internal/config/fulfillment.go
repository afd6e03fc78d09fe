package config

import (
	"fmt"
	"net/url"
	"strings"
)

// loadFulfillment reads ALLOW_INSECURE_HTTP and FULFILLMENT_URL, an
// absolute http(s) URL (its trailing slash dropped) that may be http://
// only to this machine (CheckCleartext). FULFILLMENT_SECRET, whose key the
// fulfillment client signs with, is read by the wiring.
func (c *Config) loadFulfillment(l *loader) {
	c.AllowInsecureHTTP = l.boolean("ALLOW_INSECURE_HTTP")
	c.FulfillmentURL = strings.TrimRight(l.str("FULFILLMENT_URL", ""), "/")
	if c.FulfillmentURL == "" {
		return
	}
	u, err := url.Parse(c.FulfillmentURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		l.fail("FULFILLMENT_URL", fmt.Sprintf("must be an absolute http(s) URL, got %q", c.FulfillmentURL))
		return
	}
	c.CheckCleartext(l.problems, "FULFILLMENT_URL", u, "orders and customers' email addresses (and FULFILLMENT_SECRET's signatures)")
}

// CheckCleartext refuses u, the value of name, when it is http:// to a host
// off this machine (what, the data it carries, would travel in clear),
// unless ALLOW_INSECURE_HTTP=true, and then warns. Loopback hosts
// (127.0.0.0/8, ::1, localhost) are for development and tests. The wiring
// holds ALERT_WEBHOOK_URL to it too.
func (c *Config) CheckCleartext(p *Problems, name string, u *url.URL, what string) {
	if u.Scheme != "http" || loopback(u.Hostname()) {
		return
	}
	if !c.AllowInsecureHTTP {
		p.Add(name, fmt.Sprintf("is http:// to %s, off this machine: %s would travel in clear; use https:// "+
			"(or set ALLOW_INSECURE_HTTP=true for a network you trust)", u.Host, what))
		return
	}
	c.Warn(name, fmt.Sprintf("is http:// to %s (ALLOW_INSECURE_HTTP=true): %s travel in clear", u.Host, strings.TrimSuffix(what, ",")))
}
