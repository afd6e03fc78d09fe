package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/mail/mailtest"
)

// What an attack got and what it left behind, measured the same way
// whichever binary runs (this checkout's, or another version's through
// E2E_SERVER_BIN), so that two runs can be compared line by line:
//
//	E2E_SERVER_BIN=/path/to/old/server go test -run 'TestAttack' -v ./e2e | grep EVIDENCE

// evidence logs one attack's answer and effects on one line.
func evidence(t testing.TB, attack, answered, wrote string) {
	t.Helper()
	t.Logf("EVIDENCE | %s | %s | %s", attack, oneLine(answered, 160), oneLine(wrote, 400))
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}

// String describes a response for the evidence.
func (r response) String() string {
	s := fmt.Sprint(r.Status)
	if r.RetryAfter != "" {
		s += " Retry-After: " + r.RetryAfter
	}
	if b := strings.TrimSpace(r.Body); b != "" {
		s += " " + b
	}
	return s
}

// effects is everything an attack could leave behind: claim rows and their
// states, stored bodies (webhook_events, in a schema that has it), orders
// and invoices and their states, emails received, fulfillment calls made.
type effects struct {
	claims   map[string]string // event_key → status
	bodies   int
	orders   map[string]string // source:external_id → status
	invoices map[string]string // stripe_invoice_id → status
	mails    []mailtest.Received
	calls    int
}

func (w *world) effects(t testing.TB) effects {
	t.Helper()
	e := effects{
		claims:   w.pairs(t, `SELECT event_key, status FROM processed_events`),
		orders:   w.pairs(t, `SELECT source || ':' || external_id, status FROM orders`),
		invoices: w.pairs(t, `SELECT stripe_invoice_id, status FROM invoices`),
		mails:    w.SMTP.Messages(),
		calls:    len(w.API.Requests()),
	}
	if count(t, w.DB, `SELECT count(*) FROM pg_class WHERE oid = to_regclass('webhook_events')`) == 1 {
		e.bodies = count(t, w.DB, `SELECT count(*) FROM webhook_events`)
	}
	return e
}

func (w *world) pairs(t testing.TB, sql string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := w.DB.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	kv, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ K, V string }])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	m := make(map[string]string, len(kv))
	for _, p := range kv {
		m[p.K] = p.V
	}
	return m
}

// since says what changed from before to e, or "nothing".
func (e effects) since(before effects) string {
	var parts []string
	var added []string
	for k, s := range e.claims {
		old, ok := before.claims[k]
		switch {
		case !ok:
			added = append(added, k+" "+s)
		case old != s:
			parts = append(parts, fmt.Sprintf("claim %s %s→%s", k, old, s))
		}
	}
	for k := range before.claims {
		if _, ok := e.claims[k]; !ok {
			parts = append(parts, "claim "+k+" deleted")
		}
	}
	sort.Strings(added)
	switch {
	case len(added) > 3:
		parts = append(parts, fmt.Sprintf("%d claim rows added", len(added)))
	case len(added) > 0:
		parts = append(parts, "claims added: "+strings.Join(added, ", "))
	}
	if d := e.bodies - before.bodies; d != 0 {
		parts = append(parts, fmt.Sprintf("%+d webhook_events rows", d))
	}
	parts = append(parts, stateChanges("order", before.orders, e.orders)...)
	parts = append(parts, stateChanges("invoice", before.invoices, e.invoices)...)
	if n := len(e.mails) - len(before.mails); n > 0 {
		var subjects []string
		for _, m := range e.mails[len(before.mails):] {
			subjects = append(subjects, fmt.Sprintf("%q", subject(m)))
		}
		parts = append(parts, fmt.Sprintf("%d emails (%s)", n, strings.Join(subjects, ", ")))
	}
	if n := e.calls - before.calls; n > 0 {
		parts = append(parts, fmt.Sprintf("%d fulfillment calls", n))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

func stateChanges(what string, before, after map[string]string) []string {
	var out []string
	for k, s := range after {
		old, ok := before[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s %s created %s", what, k, s))
		case old != s:
			out = append(out, fmt.Sprintf("%s %s %s→%s", what, k, old, s))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, fmt.Sprintf("%s %s deleted", what, k))
		}
	}
	sort.Strings(out)
	return out
}

// subject is a received message's decoded Subject.
func subject(m mailtest.Received) string {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		return "(unreadable)"
	}
	s := msg.Header.Get("Subject")
	if d, err := new(mime.WordDecoder).DecodeHeader(s); err == nil {
		s = d
	}
	return s
}

// request sends one request with header and reads the answer.
func request(t testing.TB, method, url string, header http.Header, body []byte) (response, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if header != nil {
		req.Header = header
	}
	res, err := deliveryClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, RetryAfter: res.Header.Get("Retry-After"), Body: string(b)}, res.Header
}

// scrape is one answer of /metrics.
type scrape struct {
	Text   string
	Series map[string]bool // every sample's name and labels
}

// metricsOf scrapes url (a /metrics).
func metricsOf(t testing.TB, url string) scrape {
	t.Helper()
	res, _ := request(t, http.MethodGet, url, nil, nil)
	if res.Status != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res)
	}
	s := scrape{Text: res.Body, Series: map[string]bool{}}
	for _, l := range strings.Split(res.Body, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				l = l[:i]
			}
			s.Series[l] = true
		}
	}
	return s
}

// added lists the series of s that were not in before.
func (s scrape) added(before scrape) []string {
	var out []string
	for k := range s.Series {
		if !before.Series[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// sample returns the value of the first series of metric name whose
// labels include every one of labels (`step="fulfillment"`), or "" when
// there is none.
func sample(text, name string, labels ...string) string {
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, lb := range labels {
			ok = ok && strings.Contains(l, lb)
		}
		if ok {
			f := strings.Fields(l)
			return f[len(f)-1]
		}
	}
	return ""
}

// filesIn lists the names of the files in dir.
func filesIn(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
