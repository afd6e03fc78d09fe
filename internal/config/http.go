package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// loadHTTP reads the listeners and what a request may cost: HTTP_ADDR and
// METRICS_ADDR, MAX_BODY_BYTES, MAX_INFLIGHT, UNVERIFIED_BODY_BYTES,
// BODY_TIMEOUT, MAX_CONNECTIONS, TRUSTED_PROXIES, GOMEMLIMIT (whether it
// is set) and SHUTDOWN_TIMEOUT.
func (c *Config) loadHTTP(l *loader) {
	c.HTTPAddr = l.str("HTTP_ADDR", DefaultHTTPAddr)
	c.MetricsAddr = l.str("METRICS_ADDR", "")
	c.MaxBodyBytes = int64(l.integer("MAX_BODY_BYTES", DefaultMaxBodyBytes))
	c.MaxInflight = l.integer("MAX_INFLIGHT", DefaultMaxInflight)
	c.UnverifiedBodyBytes = int64(l.integer("UNVERIFIED_BODY_BYTES", DefaultUnverifiedBodyBytes))
	c.BodyTimeout = l.duration("BODY_TIMEOUT", DefaultBodyTimeout)
	c.MaxConnections = l.integer("MAX_CONNECTIONS", DefaultMaxConnections)
	c.MemoryLimitSet = l.str("GOMEMLIMIT", "") != ""
	c.ShutdownTimeout = l.duration("SHUTDOWN_TIMEOUT", DefaultShutdownTimeout)

	for _, a := range []struct{ name, value string }{{"HTTP_ADDR", c.HTTPAddr}, {"METRICS_ADDR", c.MetricsAddr}} {
		checkAddr(l, a.name, a.value)
	}
	if c.MetricsAddr != "" && c.MetricsAddr == c.HTTPAddr && !anyPort(c.MetricsAddr) {
		l.fail("METRICS_ADDR", "must differ from HTTP_ADDR (unset it to serve /metrics on HTTP_ADDR)")
	}
	if host, _, err := net.SplitHostPort(c.HTTPAddr); err == nil && c.MetricsAddr == "" && !loopback(host) {
		c.Warn("METRICS_ADDR", "is unset: /metrics is served on HTTP_ADDR ("+c.HTTPAddr+"), the public listener, where anybody who "+
			"reaches the webhook routes reads the receiver's counters; set METRICS_ADDR to a private address (127.0.0.1:9090, "+
			"or the internal network's)")
	}
	for _, p := range l.list("TRUSTED_PROXIES") {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			if a, aerr := netip.ParseAddr(p); aerr == nil {
				pfx, err = a.Prefix(a.BitLen())
			}
		}
		if err != nil {
			l.fail("TRUSTED_PROXIES", fmt.Sprintf("%q is not a CIDR (10.0.0.0/8) or an address", p))
			continue
		}
		c.TrustedProxies = append(c.TrustedProxies, pfx.Masked())
	}
	if c.MaxBodyBytes <= 0 {
		l.fail("MAX_BODY_BYTES", "must be a positive number of bytes")
	}
	if c.MaxInflight < 1 {
		l.fail("MAX_INFLIGHT", "must be at least 1")
	}
	if c.MaxBodyBytes > 0 && c.UnverifiedBodyBytes < c.MaxBodyBytes {
		l.fail("UNVERIFIED_BODY_BYTES", fmt.Sprintf("must be at least MAX_BODY_BYTES (%d): a body of the largest size must fit", c.MaxBodyBytes))
	}
	if c.BodyTimeout < 100*time.Millisecond || c.BodyTimeout > time.Minute {
		l.fail("BODY_TIMEOUT", "must be between 100ms and 1m")
	}
	if c.MaxConnections < 16 {
		l.fail("MAX_CONNECTIONS", "must be at least 16")
	}
	if c.ShutdownTimeout <= 0 {
		l.fail("SHUTDOWN_TIMEOUT", "must be positive")
	}
}

// checkAddr refuses a listener's address, when set, that is not host:port
// or :port.
func checkAddr(l *loader, name, value string) {
	if value == "" {
		return
	}
	if _, _, err := net.SplitHostPort(value); err != nil {
		l.fail(name, fmt.Sprintf("must be host:port or :port, got %q", value))
	}
}

// anyPort reports whether addr asks for any free port (":0"): two such
// listeners get two ports.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// loopback reports whether host names the loopback interface: "localhost"
// or a loopback address, where what is sent never leaves the machine.
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()
}

// The terms of MemoryBound that no setting names, measured with margin
// (docs/http.md, "What a request costs").
const (
	// BaseMemory is what the process holds with nothing in flight: the
	// runtime, the binary, the pool and its connections' buffers, the
	// metrics, the body buffers kept for reuse (24 MiB resident when idle).
	BaseMemory = 48 << 20
	// ConnectionMemory is what one open connection may hold besides its
	// body: a goroutine's stack, net/http's buffers, and headers of up to
	// 64 KiB read and parsed (84 KiB measured with 60 KiB of headers, 21
	// KiB with a delivery's).
	ConnectionMemory = 128 << 10
	// DeliveryBodies is how many copies of its body a verified delivery
	// may hold while it is processed: the body, what is decoded from it,
	// and the query that stores it.
	DeliveryBodies = 3
)

// MemoryBound is the most memory requests can make the receiver hold, as
// docs/http.md states it:
//
//	BaseMemory + UNVERIFIED_BODY_BYTES + MAX_INFLIGHT × DeliveryBodies × MAX_BODY_BYTES
//	  + MAX_CONNECTIONS × ConnectionMemory
//
// Unless GOMEMLIMIT is set, it is also the runtime's soft memory limit,
// so that the collector's headroom (GOGC) cannot take the process past
// it.
func (c Config) MemoryBound() int64 {
	return c.StrangerMemoryBound() + int64(c.MaxInflight)*DeliveryBodies*c.MaxBodyBytes
}

// StrangerMemoryBound is the part of MemoryBound that requests nobody
// signed can reach: all of it but the verified deliveries' term,
//
//	BaseMemory + UNVERIFIED_BODY_BYTES + MAX_CONNECTIONS × ConnectionMemory
func (c Config) StrangerMemoryBound() int64 {
	return BaseMemory + c.UnverifiedBodyBytes + int64(c.MaxConnections)*ConnectionMemory
}
