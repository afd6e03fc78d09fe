package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/ratelimit"
)

// TestPerClient: a client gets its burst, then one call per 1/rate; another
// client is not held back by it.
func TestPerClient(t *testing.T) {
	l := ratelimit.New(ratelimit.Limits{Rate: 2, Burst: 4, OverallRate: 1000, OverallBurst: 1000})
	now := time.Unix(1_700_000_000, 0)
	for i := range 4 {
		if v, _ := l.Allow("a", now); v != ratelimit.Allowed {
			t.Fatalf("call %d of the burst: %v", i+1, v)
		}
	}
	v, wait := l.Allow("a", now)
	if v != ratelimit.ClientLimited || wait <= 0 || wait > time.Second {
		t.Errorf("past the burst: %v, wait %v; want ClientLimited within a second", v, wait)
	}
	if v, _ := l.Allow("b", now); v != ratelimit.Allowed {
		t.Errorf("another client: %v", v)
	}
	if v, _ := l.Allow("a", now.Add(wait)); v != ratelimit.Allowed {
		t.Errorf("after the wait it was told: %v", v)
	}
}

// TestOverall: many clients together are held to the overall rate, however
// many addresses they use.
func TestOverall(t *testing.T) {
	l := ratelimit.New(ratelimit.Limits{Rate: 2, Burst: 4, OverallRate: 10, OverallBurst: 10})
	now := time.Unix(1_700_000_000, 0)
	allowed := 0
	for i := range 1000 {
		if v, _ := l.Allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now); v == ratelimit.Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d calls allowed at once from 1000 clients, want the overall burst, 10", allowed)
	}
	if v, _ := l.Allow("fresh", now); v != ratelimit.OverallLimited {
		t.Errorf("a new client past the overall burst: %v, want OverallLimited", v)
	}
}

// TestBoundedMemory: the table never holds more than MaxClients; clients
// whose buckets have filled up again are swept to make room, and a client
// it cannot hold is limited by the overall bucket alone.
func TestBoundedMemory(t *testing.T) {
	l := ratelimit.New(ratelimit.Limits{Rate: 1, Burst: 2, OverallRate: 1e9, OverallBurst: 1e9, MaxClients: 100})
	now := time.Unix(1_700_000_000, 0)
	for i := range 10_000 {
		l.Allow(fmt.Sprintf("c%d", i), now)
		if l.Size() > 100 {
			t.Fatalf("after %d clients the table holds %d", i+1, l.Size())
		}
	}
	later := now.Add(5 * time.Second) // every bucket has filled up again
	if v, _ := l.Allow("newcomer", later); v != ratelimit.Allowed || l.Size() > 100 {
		t.Errorf("a newcomer once the table could be swept: %v, size %d", v, l.Size())
	}
}

// TestClient: IPv6 clients are their /64; IPv4 their address.
func TestClient(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1": "192.0.2.1", "::ffff:192.0.2.1": "192.0.2.1", "2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64", "not an address": "unknown",
	} {
		if got := ratelimit.Client(in); got != want {
			t.Errorf("Client(%q) = %q, want %q", in, got, want)
		}
	}
}
