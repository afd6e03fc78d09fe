package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// loadConsole reads the console's and the read API's settings: ADMIN_ADDR,
// ADMIN_TOKEN (required with ADMIN_ADDR, and never a development value
// outside the development tool), ADMIN_HOSTS, ADMIN_COOKIE_SECURE,
// ADMIN_LOCKOUT and API_TOKEN, which must open nothing the console's token
// does, nor the other way round. HTTP_ADDR and METRICS_ADDR are read
// first: the console never shares their listeners.
func (c *Config) loadConsole(l *loader, dev bool) {
	c.AdminAddr = l.str("ADMIN_ADDR", "")
	c.AdminToken = l.str("ADMIN_TOKEN", "")
	c.AdminHosts = l.list("ADMIN_HOSTS")
	c.AdminLockout = l.duration("ADMIN_LOCKOUT", DefaultAdminLockout)
	c.AdminCookieSecure = l.boolean("ADMIN_COOKIE_SECURE")
	c.APIToken = l.str("API_TOKEN", "")
	if !dev && containsFold(c.AdminToken, devWord) {
		l.fail("ADMIN_TOKEN", devRefusal)
	}
	checkAddr(l, "ADMIN_ADDR", c.AdminAddr)
	if c.AdminAddr != "" {
		switch {
		case !anyPort(c.AdminAddr) && (c.AdminAddr == c.HTTPAddr || c.AdminAddr == c.MetricsAddr):
			l.fail("ADMIN_ADDR", "must differ from HTTP_ADDR and METRICS_ADDR: the console never shares the public listener")
		case len(c.AdminToken) < 16:
			l.fail("ADMIN_TOKEN", "must be set, at least 16 characters, when ADMIN_ADDR is set")
		}
	}
	for _, h := range c.AdminHosts {
		if !hostName(h) {
			l.fail("ADMIN_HOSTS", fmt.Sprintf("%q is not a host name or address, with or without a port (console.example.com, 10.0.0.5:8081)", h))
		}
	}
	if c.AdminLockout < time.Second || c.AdminLockout > 24*time.Hour {
		l.fail("ADMIN_LOCKOUT", "must be from 1s to 24h")
	}
	switch {
	case c.APIToken == "":
	case len(c.APIToken) < 16:
		l.fail("API_TOKEN", "must be at least 16 characters")
	case c.APIToken == c.AdminToken:
		l.fail("API_TOKEN", "must differ from ADMIN_TOKEN: the read API's token opens no console page, nor the console's the API")
	case c.AdminAddr == "":
		c.Warn("API_TOKEN", "is set but ADMIN_ADDR is not: the read API is served on ADMIN_ADDR only")
	}
}

// hostName reports whether s is a host name or an IP address, with or
// without a port: an entry of ADMIN_HOSTS (console.ParseHost reads it).
func hostName(s string) bool {
	host := s
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		host = h
		if err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return !strings.Contains(host, "%")
	}
	return host != "" && len(host) <= 253 && strings.Trim(strings.ToLower(host), "abcdefghijklmnopqrstuvwxyz0123456789.-") == ""
}
