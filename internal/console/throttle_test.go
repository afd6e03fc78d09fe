package console

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// The throttle's rules, on a clock of the test's own.

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// try is one token check from client at now: whether it ran, and why not.
func try(th *throttle, client string, right bool, now time.Time) (time.Duration, refusal) {
	wait, why := th.begin(client, now)
	if why == checkAllowed {
		th.end(client, right, now)
	}
	return wait, why
}

func TestThrottleClient(t *testing.T) {
	const lockout = 10 * time.Minute
	th := newThrottle(lockout, t0)
	now := t0
	for i := range clientFailures {
		if _, why := try(th, "192.0.2.1", false, now); why != checkAllowed {
			t.Fatalf("wrong token %d refused (%d): the first %d are answered", i+1, why, clientFailures)
		}
		now = now.Add(time.Second)
	}
	t.Run("LockedOut", func(t *testing.T) {
		wait, why := try(th, "192.0.2.1", true, now)
		if why != clientLockedOut {
			t.Fatalf("the right token after %d wrong ones: %d, want clientLockedOut", clientFailures, why)
		}
		// Locked out from the last wrong token on.
		if want := lockout - time.Second; wait != want {
			t.Errorf("wait %v, want %v", wait, want)
		}
	})
	t.Run("OtherClient", func(t *testing.T) {
		if _, why := try(th, "192.0.2.2", true, now); why != checkAllowed {
			t.Errorf("another client refused: %d", why)
		}
	})
	t.Run("Recovers", func(t *testing.T) {
		later := now.Add(lockout)
		if _, why := try(th, "192.0.2.1", true, later); why != checkAllowed {
			t.Fatalf("the right token after the lockout: %d", why)
		}
		// A fresh count: clientFailures-1 wrong tokens, still answered.
		for i := range clientFailures - 1 {
			if _, why := try(th, "192.0.2.1", false, later); why != checkAllowed {
				t.Fatalf("wrong token %d after the lockout refused: %d", i+1, why)
			}
		}
		if _, why := try(th, "192.0.2.1", false, later); why != checkAllowed {
			t.Fatal("the last wrong token of a fresh count was refused")
		}
		if _, why := try(th, "192.0.2.1", true, later); why != clientLockedOut {
			t.Errorf("after %d more wrong tokens the client is not locked out again: %d", clientFailures, why)
		}
	})
}

// TestThrottleWindow: wrong tokens count within a lockout from the first;
// a slow trickle never locks an operator out.
func TestThrottleWindow(t *testing.T) {
	const lockout = time.Minute
	th := newThrottle(lockout, t0)
	now := t0
	for i := range 10 * clientFailures {
		if _, why := try(th, "192.0.2.1", false, now); why != checkAllowed {
			t.Fatalf("wrong token %d, one every %v, refused", i+1, lockout/(clientFailures-1))
		}
		now = now.Add(lockout / (clientFailures - 1))
	}
}

// TestThrottleRightTokenKeepsNoState: a script's right tokens take nothing
// from the budget and leave no entry behind.
func TestThrottleRightTokenKeepsNoState(t *testing.T) {
	th := newThrottle(time.Minute, t0)
	for i := range 10 * overallFailures {
		if _, why := try(th, fmt.Sprintf("10.0.%d.%d", i/256, i%256), true, t0); why != checkAllowed {
			t.Fatalf("right token %d refused: %d", i+1, why)
		}
	}
	if n := th.size(); n != 0 {
		t.Errorf("%d clients remembered after right tokens only", n)
	}
}

// TestThrottleOverall: many addresses, one wrong token each, guess no
// faster than overallFailures per lockout; while the budget is spent the
// right token waits too; it refills with time.
func TestThrottleOverall(t *testing.T) {
	const lockout = 100 * time.Second // one wrong token a second overall
	th := newThrottle(lockout, t0)
	for i := range overallFailures {
		if _, why := try(th, fmt.Sprintf("198.51.100.%d", i), false, t0); why != checkAllowed {
			t.Fatalf("wrong token %d of the overall burst refused: %d", i+1, why)
		}
	}
	wait, why := try(th, "203.0.113.9", true, t0)
	if why != overallSpent {
		t.Fatalf("a fresh client's right token after %d wrong ones from everywhere: %d, want overallSpent", overallFailures, why)
	}
	if wait != time.Second {
		t.Errorf("wait %v, want 1s (the time one wrong token takes to come back)", wait)
	}
	if _, why := try(th, "203.0.113.9", true, t0.Add(time.Second)); why != checkAllowed {
		t.Errorf("refused after the budget refilled by one: %d", why)
	}
	// A sustained attack from ever new addresses gets one guess a second.
	now, guesses := t0.Add(time.Second), 0
	for i := range 10_000 {
		wait, why := try(th, fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), false, now)
		if why == checkAllowed {
			guesses++
			continue
		}
		now = now.Add(wait)
	}
	if elapsed := now.Sub(t0); guesses > int(elapsed/time.Second)+1 {
		t.Errorf("%d guesses in %v: more than one a second", guesses, elapsed)
	}
}

// TestThrottleBoundedMemory: an attacker with endless addresses, each
// giving one wrong token whenever the throttle answers, fills the client
// table with no more than a few times the overall cap; and the table
// never passes maxClients.
func TestThrottleBoundedMemory(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxClients int
		want       int
	}{
		{"ByTheOverallCap", maxClients, 3 * overallFailures},
		{"ByMaxClients", 40, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := newThrottle(time.Minute, t0)
			th.maxClients = tc.maxClients
			now, largest := t0, 0
			for i := range 200_000 {
				wait, why := try(th, fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), false, now)
				if why != checkAllowed {
					now = now.Add(wait)
				}
				largest = max(largest, th.size())
			}
			if largest > tc.want {
				t.Errorf("the table held %d clients over %v; want at most %d", largest, now.Sub(t0), tc.want)
			}
			t.Logf("%d clients at most over %v", largest, now.Sub(t0).Round(time.Minute))
		})
	}
}

// TestClientKey: a client is its address; an IPv6 client is its /64.
func TestClientKey(t *testing.T) {
	c := &Console{}
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.7:5000", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:5000", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:5000", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:5000", "fe80::/64"},
		{"garbage", "unknown"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if got := c.clientOf(r); got != tc.want {
			t.Errorf("client of %s = %q, want %q", tc.remote, got, tc.want)
		}
	}
}
