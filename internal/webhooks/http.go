package webhooks

import (
	"context"
	"encoding/json/jsontext"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/telemetry"
)

// Handler serves the webhook routes: it refuses what cannot be a delivery
// before reading it, reads the raw body once, has the provider verify it,
// hands the event to the processor and turns the result into the status
// the sender acts on. It makes no business decision.
type Handler struct {
	proc     *Processor
	metrics  *Metrics
	log      *slog.Logger
	maxBody  int64
	inflight chan struct{}
	now      func() time.Time
}

// NewHandler returns a handler that accepts bodies up to maxBody bytes and
// processes at most maxInflight deliveries at once (MAX_INFLIGHT): beyond
// that, 503 with Retry-After and nothing written. A delivery holds no
// connection while its steps talk to the outside world, so the bound is on
// memory and goroutines, not on the pool.
func NewHandler(proc *Processor, metrics *Metrics, log *slog.Logger, maxBody int64, maxInflight int) *Handler {
	return &Handler{proc: proc, metrics: metrics, log: log, maxBody: maxBody,
		inflight: make(chan struct{}, max(maxInflight, 1)), now: time.Now}
}

// response is the JSON body of every answer to a delivery.
type response struct {
	Outcome string `json:"outcome"`
	Event   string `json:"event,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Route returns the handler of spec's route, served by prov.
func (h *Handler) Route(spec Spec, prov Provider) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		ctx := reqlog.With(req.Context(), "source", spec.Source)
		telemetry.Annotate(ctx, telemetry.AttrSource.String(spec.Source))
		d := delivery{h: h, spec: spec, w: w, req: req, start: start}
		d.serve(ctx, prov)
	})
}

// delivery is one request to a webhook route.
type delivery struct {
	h     *Handler
	spec  Spec
	w     http.ResponseWriter
	req   *http.Request
	start time.Time
}

func (d *delivery) serve(ctx context.Context, prov Provider) {
	h, spec, req := d.h, d.spec, d.req
	select {
	case h.inflight <- struct{}{}:
		defer func() { <-h.inflight }()
	default:
		d.w.Header().Set("Retry-After", "1")
		d.reject(ctx, http.StatusServiceUnavailable, "too_many_in_flight", nil)
		return
	}
	if !signed(req.Header, spec.SignatureHeaders) {
		// Refused before the body is read: an unsigned request costs us
		// its headers only. The connection is closed rather than drained.
		d.w.Header().Set("Connection", "close")
		d.reject(ctx, http.StatusBadRequest, "missing_signature", nil)
		return
	}
	if req.ContentLength > h.maxBody {
		d.w.Header().Set("Connection", "close")
		d.reject(ctx, http.StatusRequestEntityTooLarge, "body_too_large", nil)
		return
	}
	body, err := readBody(http.MaxBytesReader(d.w, req.Body, h.maxBody), req.ContentLength)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			d.reject(ctx, http.StatusRequestEntityTooLarge, "body_too_large", nil)
			return
		}
		d.reject(ctx, http.StatusBadRequest, "body_unreadable", err)
		return
	}

	_, verify := telemetry.Start(ctx, "webhook.verify", trace.SpanKindInternal, telemetry.AttrSource.String(spec.Source))
	ev, err := prov.Verify(req.Header, body, h.now())
	if err != nil {
		reason := "invalid"
		var rej *RejectError
		if errors.As(err, &rej) {
			reason = rej.Reason
		}
		telemetry.Failed(verify, reason)
		verify.End()
		d.reject(ctx, http.StatusBadRequest, reason, err)
		return
	}
	verify.End()
	ev.Via = ViaDelivery
	h.metrics.secretMatched(spec.Source, ev.SecretIndex)
	ctx = reqlog.With(ctx, "event_id", ev.ID, "event_type", ev.Type)
	telemetry.Annotate(ctx, telemetry.AttrEventID.String(ev.ID), telemetry.AttrEventKey.String(ev.Key),
		telemetry.AttrEventType.String(ev.Type))
	if spec.APIVersion != "" && ev.APIVersion != "" && ev.APIVersion != spec.APIVersion {
		h.metrics.APIVersionMismatch.WithLabelValues(spec.Source, apiVersionLabel(ev.APIVersion)).Inc()
	}

	// A verified event is processed to the end even if the sender hangs
	// up (GitHub gives up after 10 s and never redelivers): a claim cut
	// off half-way would only be rolled back and lost with it.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.proc.DeliveryTimeout())
	defer cancel()
	res := h.proc.Process(pctx, prov, ev)
	typ := "other"
	if spec.Handles(ev.Type) {
		typ = ev.Type
	}
	h.metrics.Deliveries.WithLabelValues(spec.Source, typ, string(res.Outcome)).Inc()

	status := http.StatusOK
	switch {
	case res.Outcome.Acknowledged():
	case res.Outcome == OutcomeLeaseConflict:
		status = http.StatusServiceUnavailable
		d.w.Header().Set("Retry-After", strconv.Itoa(int(res.RetryAfter/time.Second)))
	case res.Outcome == OutcomeStepFailed:
		status = http.StatusBadGateway
	default:
		status = http.StatusServiceUnavailable
		d.w.Header().Set("Retry-After", "5")
	}
	d.answer(status, response{Outcome: string(res.Outcome), Event: ev.ID})
	telemetry.Annotate(ctx, telemetry.AttrOutcome.String(string(res.Outcome)))
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	h.log.Log(ctx, level, "delivery", "status", status, "outcome", string(res.Outcome),
		"duration_ms", time.Since(d.start).Milliseconds(), "error", errText(res.Err))
}

// reject answers a delivery refused before anything was written. The
// error may quote request parts: providers cap what they quote.
func (d *delivery) reject(ctx context.Context, status int, reason string, err error) {
	d.h.metrics.Rejections.WithLabelValues(d.spec.Source, reason).Inc()
	if reason == ReasonNoValidSignature {
		d.h.metrics.signatureMismatch(d.spec.Source, err)
	}
	telemetry.Annotate(ctx, telemetry.AttrOutcome.String("rejected"), telemetry.AttrRejection.String(reason))
	d.answer(status, response{Outcome: "rejected", Reason: reason})
	d.h.log.WarnContext(ctx, "delivery rejected", "status", status, "reason", reason, "error", errText(err),
		"duration_ms", time.Since(d.start).Milliseconds(), d.spec.hintAttr(err))
}

func (d *delivery) answer(status int, r response) {
	d.w.Header().Set("Content-Type", "application/json")
	d.w.WriteHeader(status)
	_, _ = d.w.Write(r.appendJSON(make([]byte, 0, 48+len(r.Event)+len(r.Reason))))
}

// appendJSON appends r as encoding/json would write it, and a newline,
// without reflection: an answer is written once per delivery.
func (r response) appendJSON(b []byte) []byte {
	b = append(b, `{"outcome":`...)
	b, _ = jsontext.AppendQuote(b, r.Outcome) // invalid UTF-8 becomes U+FFFD, as encoding/json writes it
	if r.Event != "" {
		b = append(b, `,"event":`...)
		b, _ = jsontext.AppendQuote(b, r.Event)
	}
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b, _ = jsontext.AppendQuote(b, r.Reason)
	}
	return append(b, "}\n"...)
}

// readBody reads a request's whole body. A body of declared length (every
// sender's: Content-Length, at most MAX_BODY_BYTES by now) up to
// presizedBody is read into one buffer of that size, which net/http holds
// the sender to, rather than grown by io.ReadAll's doubling (twice the
// allocation and copies). Content-Length is not signed: a larger one, or
// none (chunked), is read as io.ReadAll reads it, so that memory follows the
// bytes that arrive, not what a header claims will.
func readBody(r io.Reader, declared int64) ([]byte, error) {
	if declared < 0 || declared > presizedBody {
		return io.ReadAll(r)
	}
	body := make([]byte, declared)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// presizedBody bounds what a request's headers alone can make readBody
// allocate: more than any Stripe or Paddle event, and 16 MiB at the default
// MAX_INFLIGHT of 256 requests that send headers and then nothing.
const presizedBody = 64 << 10

// signed reports whether any of the signature headers is present.
func signed(h http.Header, names []string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if h.Get(n) != "" {
			return true
		}
	}
	return false
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
