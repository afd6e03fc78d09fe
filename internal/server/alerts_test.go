package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/providers"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestRefusedConnectionsRaiseLoad: connections the listener refuses are
// counted by the alerts' monitor: the load cause holds.
func TestRefusedConnectionsRaiseLoad(t *testing.T) {
	const limit = 16
	r := rt.New(t, providers.List(), append(listen, rt.Env("MAX_CONNECTIONS", "16"))...)
	addr := strings.TrimPrefix(serve(t, r), "http://")
	// One address takes seven eighths of the bound, then asks for more:
	// each is refused, its share being half.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 10 * time.Second}
	for range limit - limit/8 + alerts.DefaultThreshold {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			continue // reset before the dial returned
		}
		t.Cleanup(func() { c.Close() })
	}
	reg := prometheus.NewRegistry()
	m := &alerts.Monitor{DB: r.Pool, Runner: r.Server.Processor(), Counters: r.Server.AlertMonitor().Counters,
		Metrics: alerts.NewMetrics(reg), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := m.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
		if loadHolds(t, reg) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the load cause does not hold after connections were refused")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loadHolds reports whether webhook_alert_conditions{cause="load"} is set.
func loadHolds(t *testing.T, reg *prometheus.Registry) bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "webhook_alert_conditions" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if hasLabel(mt, "cause", string(alerts.CauseLoad)) {
				return mt.GetGauge().GetValue() > 0
			}
		}
	}
	return false
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
