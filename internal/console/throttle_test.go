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
	h, wait, why := th.begin(client, now)
	if why == checkAllowed {
		th.end(client, h, right, now)
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

// TestThrottleOverall: many addresses, one wrong token each, spend the
// overall budget; from then on a wrong token locks its address out at
// once, a fresh client's right token is still checked (it has not failed),
// and a client may not have two checks running.
func TestThrottleOverall(t *testing.T) {
	const lockout = 100 * time.Second // the budget refills one wrong token a second
	th := newThrottle(lockout, t0)
	for i := range overallFailures {
		if _, why := try(th, fmt.Sprintf("198.51.100.%d", i), false, t0); why != checkAllowed {
			t.Fatalf("wrong token %d of the overall burst refused: %d", i+1, why)
		}
	}
	if _, why := try(th, "203.0.113.9", true, t0); why != checkAllowed {
		t.Fatalf("a fresh client's right token after %d wrong ones from everywhere: %d, want checkAllowed", overallFailures, why)
	}
	if _, why := try(th, "203.0.113.10", false, t0); why != checkAllowed {
		t.Fatalf("a fresh client's wrong token past the cap: %d, want checked", why)
	}
	if wait, why := try(th, "203.0.113.10", true, t0); why != clientLockedOut || wait != lockout {
		t.Errorf("its right token next: %d after %v, want clientLockedOut for the lockout", why, wait)
	}
	// A client of the burst, 1 wrong token so far, gets one more check.
	if _, why := try(th, "198.51.100.1", false, t0); why != checkAllowed {
		t.Errorf("a client of the burst past the cap: %d, want one more check", why)
	}
	if _, why := try(th, "198.51.100.1", true, t0); why != clientLockedOut {
		t.Errorf("after its wrong token past the cap: %d, want clientLockedOut", why)
	}

	t.Run("OneCheckInFlight", func(t *testing.T) {
		h, _, why := th.begin("203.0.113.20", t0)
		if why != checkAllowed {
			t.Fatalf("first check: %d", why)
		}
		if _, _, why := th.begin("203.0.113.20", t0); why != clientBusy {
			t.Errorf("a second check of the same client while the first runs: %d, want clientBusy", why)
		}
		th.end("203.0.113.20", h, true, t0)
		if _, why := try(th, "203.0.113.20", true, t0); why != checkAllowed {
			t.Errorf("after the first ended: %d", why)
		}
	})

	t.Run("Refills", func(t *testing.T) {
		later := t0.Add(lockout)
		for i := range clientFailures - 1 {
			if _, why := try(th, "192.0.2.77", false, later); why != checkAllowed {
				t.Fatalf("wrong token %d once the budget is back: %d", i+1, why)
			}
		}
		if _, why := try(th, "192.0.2.77", true, later); why != checkAllowed {
			t.Errorf("%d wrong tokens with the budget back do not lock a client out: %d", clientFailures-1, why)
		}
	})
}

// TestThrottleLockOutCase is the case that locked the operator out: 125
// wrong tokens from 25 addresses, then the right one from a new address;
// and about one wrong token per refill (9 s by default) from 20 addresses
// keeping the budget spent, the right token from a new address meanwhile.
func TestThrottleLockOutCase(t *testing.T) {
	th := newThrottle(DefaultLockout, t0)
	for i := range 125 {
		try(th, fmt.Sprintf("10.0.0.%d", i/5+1), false, t0)
	}
	if _, why := try(th, "198.51.100.7", true, t0); why != checkAllowed {
		t.Fatalf("the right token from a new address after 125 wrong ones from 25: %d, want checkAllowed", why)
	}
	now, per := t0, DefaultLockout/overallFailures
	for i := range 200 {
		now = now.Add(per)
		try(th, fmt.Sprintf("10.1.0.%d", i%20+1), false, now)
		if _, why := try(th, fmt.Sprintf("198.51.101.%d", i%250), true, now); why != checkAllowed {
			t.Fatalf("trickle %d: the right token from a new address: %d", i+1, why)
		}
	}
}

// TestThrottleBoundedGuesses: an attacker with endless addresses, each
// giving one wrong token whenever the throttle answers, fills the client
// table to maxClients at most, and gets no more than maxClients +
// overallFailures guesses per lockout; once the table is full, clients it
// does not hold wait for the budget.
func TestThrottleBoundedGuesses(t *testing.T) {
	const lockout, tableSize = time.Minute, 300
	th := newThrottle(lockout, t0)
	th.maxClients = tableSize
	now, largest, guesses := t0, 0, 0
	for i := range 200_000 {
		wait, why := try(th, fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), false, now)
		switch why {
		case checkAllowed:
			guesses++
		case overallSpent:
			now = now.Add(wait)
		default:
			t.Fatalf("address %d, never seen before: %d", i, why)
		}
		largest = max(largest, th.size())
	}
	if largest > tableSize {
		t.Errorf("the table held %d clients; want at most %d", largest, tableSize)
	}
	windows := int(now.Sub(t0)/lockout) + 1
	if limit := windows * (tableSize + overallFailures); guesses > limit {
		t.Errorf("%d guesses over %v: more than %d per lockout", guesses, now.Sub(t0), tableSize+overallFailures)
	}
	t.Logf("%d guesses over %v, %d clients at most", guesses, now.Sub(t0).Round(time.Second), largest)
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
