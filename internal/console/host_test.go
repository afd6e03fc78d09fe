package console

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHosts: which Host headers name the console, for each kind of
// ADMIN_ADDR and with ADMIN_HOSTS.
func TestHosts(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		hosts []string
		ok    []string
		no    []string
	}{
		{addr: "127.0.0.1:8081",
			ok: []string{"127.0.0.1:8081", "localhost:8081", "LOCALHOST:8081", "[::1]:8081", "127.0.0.2:8081", "[::ffff:127.0.0.1]:8081"},
			no: []string{"evil.example:8081", "evil.example", "localhost:8082", "localhost", "127.0.0.1", "10.0.0.5:8081",
				"localhost.:8081", "localhost.evil.example:8081", "127.0.0.1.nip.io:8081", "", ":8081", "[fe80::1%25eth0]:8081"}},
		{addr: "localhost:8081",
			ok: []string{"localhost:8081", "127.0.0.1:8081", "[::1]:8081"},
			no: []string{"evil.example:8081", "10.0.0.5:8081"}},
		{addr: ":8081",
			ok: []string{"127.0.0.1:8081", "localhost:8081", "10.0.0.5:8081", "[fd00::5]:8081"},
			no: []string{"evil.example:8081", "console.example.com:8081", "10.0.0.5:8080", "10.0.0.5"}},
		{addr: "0.0.0.0:80",
			ok: []string{"10.0.0.5", "10.0.0.5:80", "localhost"},
			no: []string{"evil.example", "10.0.0.5:8080"}},
		{addr: "10.0.0.5:8081",
			ok: []string{"10.0.0.5:8081"},
			no: []string{"localhost:8081", "127.0.0.1:8081", "10.0.0.6:8081", "evil.example:8081"}},
		{addr: "admin.internal:8081",
			ok: []string{"admin.internal:8081", "ADMIN.internal:8081"},
			no: []string{"localhost:8081", "admin.internal:8082", "evil.example:8081", "admin.internal.evil.example:8081"}},
		{addr: "127.0.0.1:8081", hosts: []string{"console.example.com", "ops.example.com:8443", "[fd00::5]:8081", "10.1.1.1"},
			ok: []string{"console.example.com", "console.example.com:443", "Console.Example.Com", "ops.example.com:8443",
				"[fd00::5]:8081", "10.1.1.1:9999", "localhost:8081"},
			no: []string{"ops.example.com", "ops.example.com:443", "example.com", "evil.console.example.com", "[fd00::5]:8082"}},
		{hosts: []string{"console.example.com"},
			ok: []string{"console.example.com"},
			no: []string{"localhost:8081", "127.0.0.1"}},
	} {
		h, err := newHosts(tc.addr, tc.hosts)
		if err != nil {
			t.Fatalf("ADMIN_ADDR %q ADMIN_HOSTS %q: %v", tc.addr, tc.hosts, err)
		}
		check := func(host string, want bool) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = host
			if got := h.allowed(r); got != want {
				t.Errorf("ADMIN_ADDR %q ADMIN_HOSTS %q: Host %q allowed = %v, want %v", tc.addr, tc.hosts, host, got, want)
			}
		}
		for _, host := range tc.ok {
			check(host, true)
		}
		for _, host := range tc.no {
			check(host, false)
		}
	}
}

// TestHostsAnyPort: with ADMIN_ADDR's port 0, the console's port is the
// one the connection came in on.
func TestHostsAnyPort(t *testing.T) {
	h, err := newHosts("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40123}))
	for host, want := range map[string]bool{"127.0.0.1:40123": true, "localhost:40123": true, "127.0.0.1:40124": false,
		"127.0.0.1:0": false, "evil.example:40123": false} {
		r.Host = host
		if got := h.allowed(r); got != want {
			t.Errorf("Host %q allowed = %v, want %v", host, got, want)
		}
	}
}

func TestParseHost(t *testing.T) {
	for _, bad := range []string{"", "http://console.example.com", "console.example.com/", "*.example.com", "user@host",
		"host:0", "host:70000", "host:x", "exa mple.com", "[fe80::1%eth0]:8081"} {
		if _, _, err := ParseHost(bad); err == nil {
			t.Errorf("ParseHost(%q) accepted", bad)
		}
	}
	if _, err := newHosts("", nil); err == nil {
		t.Error("no ADMIN_ADDR and no ADMIN_HOSTS accepted: every request would be refused")
	}
}
