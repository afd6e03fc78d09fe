package alerts_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/alerts"
)

// TestEndpointOncePerFindingAndHour: the endpoint check's problems are
// told once per finding and hour: a second evaluation, or another
// replica's, in the hour raises nothing; a new finding is told at once; a
// note replaced by a run that found nothing, or older than it holds,
// tells nothing more.
func TestEndpointOncePerFindingAndHour(t *testing.T) {
	w := newWorld(t)
	disabled := alerts.EndpointFinding{ID: "stripe:disabled:we_1", Title: "stripe endpoint we_1: disabled",
		Line: "stripe we_1: disabled (status disabled): stripe sends it nothing; --fix re-enables it"}
	w.mon.NoteEndpoints([]alerts.EndpointFinding{disabled}, w.now.Add(30*time.Minute))
	if got := w.once(t); !slices.Equal(got, []string{"endpoint:stripe:disabled:we_1"}) {
		t.Fatalf("raised %v", got)
	}
	if v := w.metric(t, "webhook_alert_conditions", "endpoint"); v != 1 {
		t.Errorf("webhook_alert_conditions{cause=endpoint} = %v, want 1", v)
	}
	w.now = w.now.Add(10 * time.Minute)
	other := w.monitor()
	other.NoteEndpoints([]alerts.EndpointFinding{disabled}, w.now.Add(30*time.Minute))
	if raised, err := other.Once(t.Context()); err != nil || len(raised) != 0 {
		t.Errorf("another replica in the hour raised %v (%v)", raised, err)
	}
	missing := alerts.EndpointFinding{ID: "paddle:missing", Title: "paddle: no endpoint sends here", Line: "paddle: no endpoint sends to …"}
	w.mon.NoteEndpoints([]alerts.EndpointFinding{disabled, missing}, w.now.Add(30*time.Minute))
	if got := w.once(t); !slices.Equal(got, []string{"endpoint:paddle:missing"}) {
		t.Errorf("a new finding in the hour raised %v, want it alone", got)
	}
	texts := w.sink.texts()["endpoint"]
	if len(texts) != 2 || !strings.HasPrefix(texts[0], "[paywebhooks] stripe endpoint we_1: disabled\nstripe we_1: disabled (status disabled)") ||
		!strings.Contains(texts[0], "server endpoints check") {
		t.Errorf("the alerts' texts:\n%s", strings.Join(texts, "\n---\n"))
	}
	w.mon.NoteEndpoints(nil, w.now.Add(30*time.Minute))
	w.now = w.now.Add(time.Hour)
	if got := w.once(t); len(got) != 0 {
		t.Errorf("after a run that found nothing, raised %v", got)
	}
	w.mon.NoteEndpoints([]alerts.EndpointFinding{disabled}, w.now.Add(30*time.Minute))
	w.now = w.now.Add(31 * time.Minute)
	if got := w.once(t); len(got) != 0 {
		t.Errorf("past the note's hold, raised %v", got)
	}
}
