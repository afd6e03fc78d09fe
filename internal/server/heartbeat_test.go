package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/server"
)

// waitUntil polls cond until it holds, or fails the test after a generous
// deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHeartbeatRecordsTheReceiver: a running receiver records itself (host,
// pid, version, start) with the fingerprint of what its steps use, which
// holds none of its secrets; once stopped it no longer counts as live.
func TestHeartbeatRecordsTheReceiver(t *testing.T) {
	r := rt.New(t, providers.List(), listen...)
	// A receiver killed two days ago, and one an hour ago: the first is
	// forgotten, the second kept, not live.
	if _, err := r.Pool.Exec(context.Background(), `
INSERT INTO receivers (id, host, pid, version, started_at, seen_at, fingerprint) VALUES
    ('gone', 'old-host', 1, 'v0', now() - interval '3 days', now() - interval '2 days', '{"v":1,"items":[]}'),
    ('hour', 'old-host', 2, 'v0', now() - interval '2 hours', now() - interval '1 hour', '{"v":1,"items":[]}')`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Server.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })

	var recs []server.Receiver
	waitUntil(t, "the receiver recorded", func() bool {
		var err error
		recs, err = server.Receivers(context.Background(), r.Pool)
		return err == nil && len(recs) > 0 && recs[0].Live
	})
	if len(recs) != 2 || recs[1].ID != "hour" || recs[1].Live || recs[1].Age < 59*time.Minute {
		t.Errorf("receivers %+v; want this one, live, and the one seen an hour ago, not live (the one of two days ago forgotten)", recs)
	}
	host, _ := os.Hostname()
	if got := recs[0]; got.Host != host || got.PID != os.Getpid() || got.Version == "" || got.StoppedAt != nil ||
		time.Since(got.StartedAt) > time.Minute {
		t.Errorf("recorded %+v; want this process, running", got)
	}
	salt, err := server.FingerprintSalt(context.Background(), r.Pool, false)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.Config.Fingerprint(salt)
	if err != nil {
		t.Fatal(err)
	}
	if d := want.Diff(recs[0].Fingerprint); len(d) != 0 || len(recs[0].Fingerprint.Items) != len(want.Items) {
		t.Errorf("the recorded fingerprint differs from the configuration's: %v", d)
	}
	var raw string
	if err := r.Pool.QueryRow(context.Background(), `SELECT fingerprint::text FROM receivers`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{rt.FulfillmentSecret, rt.FulfillmentSecret[6:30], rt.Secret(stripe.Spec), string(salt)} {
		if strings.Contains(raw, secret) {
			t.Errorf("the receivers table holds %q", secret)
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
	recs, err = server.Receivers(context.Background(), r.Pool)
	if err != nil || len(recs) != 2 || recs[0].Live || recs[0].StoppedAt == nil {
		t.Errorf("after the receiver stopped: %+v, %v; want it recorded as stopped, not live", recs, err)
	}
}

// logLines is a log writer a test reads.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestHeartbeatFailureServesAllTheSame: a receiver that cannot write its
// record (the table gone) starts and answers deliveries all the same; the
// failure is logged once, and the record is written once it can be.
func TestHeartbeatFailureServesAllTheSame(t *testing.T) {
	r := rt.New(t, providers.List(), listen...)
	ctx := context.Background()
	if _, err := r.Pool.Exec(ctx, `ALTER TABLE receivers RENAME TO receivers_away`); err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	res := r.Deliver(t, stripe.Spec, []byte(`{"id":"evt_hb","object":"event","type":"invoice.created",
"data":{"object":{"id":"in_hb","object":"invoice","amount_due":900,"currency":"usd"}}}`), nil)
	if res.Status != 200 {
		t.Fatalf("a delivery while the record cannot be written: %d %s", res.Status, res.Body)
	}

	var log logLines
	h := server.NewHeartbeat(r.Pool, r.Config, slog.New(slog.NewJSONHandler(&log, nil)))
	hctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { h.Run(hctx); close(stopped) }()
	waitUntil(t, "the failure logged", func() bool { return log.count("could not record this receiver") == 1 })
	h.Poke()
	h.Poke()
	if _, err := r.Pool.Exec(ctx, `ALTER TABLE receivers_away RENAME TO receivers`); err != nil {
		t.Fatal(err)
	}
	h.Poke()
	waitUntil(t, "the record written", func() bool { return log.count("receiver recorded again") == 1 })
	stop()
	<-stopped
	if n := log.count("could not record this receiver"); n != 1 {
		t.Errorf("the failure logged %d times, want once", n)
	}
	var fp json.RawMessage
	if err := r.Pool.QueryRow(ctx, `SELECT fingerprint FROM receivers WHERE pid = $1 AND stopped_at IS NOT NULL`, os.Getpid()).Scan(&fp); err != nil {
		t.Errorf("the heartbeat's record after it stopped: %v", err)
	}
}
