package telemetrytest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is a tiny OTLP/HTTP receiver: it accepts POST /v1/traces (an
// ExportTraceServiceRequest in protobuf, gzipped or not), counts the spans
// and keeps the first 10,000 of them. It is closed by the test's cleanup.
//
//	c := telemetrytest.NewCollector(t)
//	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL())
type Collector struct {
	srv    *httptest.Server
	decode bool

	mu    sync.Mutex
	spans []*tracepb.Span
}

// keep is how many spans a Collector keeps.
const keep = 10_000

// NewCollector starts a collector that decodes what it receives.
func NewCollector(tb testing.TB) *Collector { return newCollector(tb, true) }

// NewSink starts a collector that reads every export and decodes none, so
// that a benchmark of the exporting process pays nothing for the
// collector's work. Its Spans are always empty.
func NewSink(tb testing.TB) *Collector { return newCollector(tb, false) }

func newCollector(tb testing.TB, decode bool) *Collector {
	tb.Helper()
	c := &Collector{decode: decode}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", c.handle)
	c.srv = httptest.NewServer(mux)
	tb.Cleanup(c.srv.Close)
	return c
}

// URL is the base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (c *Collector) URL() string { return c.srv.URL }

// Spans returns the spans kept so far.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

func (c *Collector) handle(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	if !c.decode {
		_, _ = io.Copy(io.Discard, body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		return
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// An ExportTraceServiceRequest is, on the wire, a TracesData: field 1,
	// the resource spans.
	var req tracepb.TracesData
	if r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "want an OTLP protobuf ExportTraceServiceRequest", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				if len(c.spans) < keep {
					c.spans = append(c.spans, s)
				}
			}
		}
	}
	c.mu.Unlock()
	// An empty ExportTraceServiceResponse: everything accepted.
	w.Header().Set("Content-Type", "application/x-protobuf")
}
