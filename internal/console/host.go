package console

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The console answers only requests whose Host names it. A page of
// another site whose name an attacker re-points at the console's address
// (DNS rebinding: evil.example resolving to 127.0.0.1) is then same-origin
// with what it fetches, and could read pages and try tokens; its requests
// carry its own name in Host, and are refused 421 Misdirected Request.

// hosts are the names a request's Host may give.
type hosts struct {
	kind  addrKind   // of ADMIN_ADDR's host
	name  string     // ADMIN_ADDR's host (lower case), when kind is addrNamed
	ip    netip.Addr // ADMIN_ADDR's address, when kind is addrNamed and it is one
	port  string     // ADMIN_ADDR's port; "0": the port the connection came in on
	extra []hostName // ADMIN_HOSTS
}

type addrKind int

const (
	addrNone     addrKind = iota // no ADMIN_ADDR: only ADMIN_HOSTS
	addrAny                      // ":8081", "0.0.0.0:8081", "[::]:8081": every interface
	addrLoopback                 // "127.0.0.1:8081", "[::1]:8081", "localhost:8081"
	addrNamed                    // any other host or address
)

// hostName is one entry of ADMIN_HOSTS.
type hostName struct {
	host string // lower case, without brackets
	port string // "": any port
}

// ParseHost reads one entry of ADMIN_HOSTS: a host name or an IP address,
// with or without a port ("console.example.com", "console.internal:8081",
// "10.0.0.5", "[fd00::5]:8081"). It refuses anything else: a scheme, a
// path, a wildcard, a user.
func ParseHost(s string) (host, port string, err error) {
	host = s
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", "", fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
		}
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	host = strings.ToLower(host)
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() == "" {
		return a.Unmap().String(), port, nil
	}
	if host == "" || len(host) > 253 {
		return "", "", fmt.Errorf("%q is not a host name or address", s)
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return "", "", fmt.Errorf("%q is not a host name or address (host or host:port, no scheme or path)", s)
		}
	}
	return host, port, nil
}

func newHosts(addr string, extra []string) (hosts, error) {
	var h hosts
	for _, e := range extra {
		host, port, err := ParseHost(e)
		if err != nil {
			return hosts{}, fmt.Errorf("ADMIN_HOSTS: %w", err)
		}
		h.extra = append(h.extra, hostName{host: host, port: port})
	}
	if addr == "" {
		if len(h.extra) == 0 {
			return hosts{}, errors.New("no ADMIN_ADDR and no ADMIN_HOSTS: every request would be refused")
		}
		return h, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return hosts{}, fmt.Errorf("ADMIN_ADDR %q: %w", addr, err)
	}
	h.port = port
	host = strings.ToLower(host)
	a, err := netip.ParseAddr(host)
	switch {
	case host == "" || err == nil && a.IsUnspecified():
		h.kind = addrAny
	case host == "localhost" || err == nil && a.IsLoopback():
		h.kind = addrLoopback
	default:
		h.kind, h.name = addrNamed, host
		if err == nil {
			h.ip = a.Unmap().WithZone("")
		}
	}
	return h, nil
}

// allowed reports whether the request's Host names the console: an entry
// of ADMIN_HOSTS, or the console's own address with its port. For an
// ADMIN_ADDR on every interface that is any IP address (a rebound name is
// never one) and localhost; for a loopback ADMIN_ADDR, localhost and any
// loopback address; else ADMIN_ADDR's host as written.
func (h hosts) allowed(r *http.Request) bool {
	host, port := r.Host, ""
	if hp, p, err := net.SplitHostPort(r.Host); err == nil {
		host, port = hp, p
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if host == "" {
		return false
	}
	host = strings.ToLower(host)
	ip, ipErr := netip.ParseAddr(host)
	isIP := ipErr == nil && ip.Zone() == ""
	if isIP {
		ip = ip.Unmap()
		host = ip.String()
	}
	for _, e := range h.extra {
		if e.host == host && (e.port == "" || e.port == port) {
			return true
		}
	}
	if h.kind == addrNone {
		return false
	}
	if port == "" {
		port = "80" // what a browser leaves out
	}
	if port != h.ownPort(r) {
		return false
	}
	switch h.kind {
	case addrAny:
		return isIP || host == "localhost"
	case addrLoopback:
		return isIP && ip.IsLoopback() || host == "localhost"
	}
	return host == h.name || isIP && h.ip.IsValid() && ip == h.ip
}

// ownPort is ADMIN_ADDR's port, or, for ":0", the port the connection
// came in on.
func (h hosts) ownPort(r *http.Request) string {
	if h.port != "0" {
		return h.port
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	return h.port
}

// misdirected answers a request for a foreign Host: 421, a short text that
// names no internals, and a log line at most every ten seconds (the Host
// is the requester's to choose: quoted and cut short).
func (c *Console) misdirected(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now().UnixNano()
	if last := c.lastMisdirected.Load(); now-last >= int64(10*time.Second) && c.lastMisdirected.CompareAndSwap(last, now) {
		host := r.Host
		if len(host) > 64 {
			host = host[:64] + "…"
		}
		c.cfg.Log.WarnContext(r.Context(), "console: request for a foreign Host refused (list the console's names in ADMIN_HOSTS)",
			"host", strconv.Quote(host), "remote", r.RemoteAddr)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusMisdirectedRequest)
	_, _ = w.Write([]byte("421 Misdirected Request: this console does not answer to that host name.\n" +
		"Its operator lists the names it is reached by in ADMIN_HOSTS.\n"))
}
