package webhooks

import (
	"context"
	"encoding/json/jsontext"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/telemetry"
)

// Handler serves the webhook routes: it refuses what cannot be a delivery
// before reading it, reads the raw body once into buffers the unverified
// budget pays for, has the provider verify it, and only then takes a
// delivery slot, hands the event to the processor and turns the result into
// the status the sender acts on. It makes no business decision.
type Handler struct {
	proc        *Processor
	metrics     *Metrics
	log         *slog.Logger
	rejected    *reqlog.Repeats // the log of refused deliveries, sampled
	maxBody     int64
	inflight    chan struct{}
	admission   *Admission
	bodyTimeout time.Duration
	clientAddr  func(*http.Request) string
	verified    func(*http.Request)
	now         func() time.Time
}

// Limits are what a Handler lets requests cost.
type Limits struct {
	// MaxBody is the largest body accepted (MAX_BODY_BYTES).
	MaxBody int64
	// MaxInflight is how many verified deliveries are processed at once
	// (MAX_INFLIGHT): beyond it, 503 with Retry-After and nothing written.
	MaxInflight int
	// UnverifiedBytes is the budget that bodies not yet verified share
	// (UNVERIFIED_BODY_BYTES), fairly by client address (see Admission).
	UnverifiedBytes int64
	// BodyTimeout is how long after its headers a body may take to arrive
	// (BODY_TIMEOUT); a slower one is answered 408 and its connection
	// closed. Zero: no deadline of the handler's own.
	BodyTimeout time.Duration
	// ClientAddr returns a request's client address, as TRUSTED_PROXIES
	// defines it; nil: the socket's peer.
	ClientAddr func(*http.Request) string
	// Verified, if not nil, is told of every request whose signature was
	// verified: the server protects its connection as a sender's.
	Verified func(*http.Request)
}

// The reasons a delivery is refused for want of room or time, not for
// what it is: the load alert counts them.
const (
	// ReasonTooManyInFlight: MAX_INFLIGHT verified deliveries at once.
	ReasonTooManyInFlight = "too_many_in_flight"
	// ReasonUnverifiedOverShare: the budget of unverified bodies is full
	// and the client's address (or its block) holds more than its share.
	ReasonUnverifiedOverShare = "unverified_over_share"
	// ReasonBodyTimeout: the body did not come within BODY_TIMEOUT.
	ReasonBodyTimeout = "body_timeout"
)

// LoadReasons are the reasons above: a closed set.
var LoadReasons = []string{ReasonTooManyInFlight, ReasonUnverifiedOverShare, ReasonBodyTimeout}

// NewHandler returns a handler within lim. A delivery holds no connection
// while its steps talk to the outside world, so MaxInflight bounds memory
// and goroutines, not the pool; it counts verified deliveries only, so
// that no stranger can take a slot from a sender.
func NewHandler(proc *Processor, metrics *Metrics, log *slog.Logger, lim Limits) *Handler {
	if lim.UnverifiedBytes <= 0 {
		lim.UnverifiedBytes = max(lim.MaxBody, 1)
	}
	clientAddr := lim.ClientAddr
	if clientAddr == nil {
		clientAddr = peerAddr
	}
	return &Handler{proc: proc, metrics: metrics, log: log, rejected: reqlog.NewRepeats(log, reqlog.RepeatPeriod, nil), maxBody: lim.MaxBody,
		inflight: make(chan struct{}, max(lim.MaxInflight, 1)), admission: NewAdmission(lim.UnverifiedBytes),
		bodyTimeout: lim.BodyTimeout, clientAddr: clientAddr, verified: lim.Verified, now: time.Now}
}

// FlushLog writes the counts of refused deliveries not logged one by one
// yet (see reject): what the server does when it stops.
func (h *Handler) FlushLog() { h.rejected.Flush() }

// Admission is the handler's budget of unverified bodies.
func (h *Handler) Admission() *Admission { return h.admission }

// peerAddr is the socket's peer address of a request.
func peerAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
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
	body, u, ok := d.readBody(ctx)
	if !ok {
		return
	}

	_, verify := telemetry.Start(ctx, "webhook.verify", trace.SpanKindInternal, telemetry.AttrSource.String(spec.Source))
	ev, err := prov.Verify(req.Header, body, h.now())
	// Verified or not, the body is no stranger's any more: a verified one
	// is a delivery's, under MAX_INFLIGHT; a refused one's buffer serves
	// the next body.
	u.leave()
	if err != nil {
		u.refuse(body)
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
	if h.verified != nil {
		h.verified(req)
	}
	select {
	case h.inflight <- struct{}{}:
		defer func() { <-h.inflight }()
	default:
		d.w.Header().Set("Retry-After", "1")
		d.reject(ctx, http.StatusServiceUnavailable, ReasonTooManyInFlight, nil)
		return
	}
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
//
// The log line is sampled (reqlog.Repeats): the first of its kind (the
// source, the reason, the status, whether it has a hint) is written whole,
// the next ones of the minute counted and said in one line, so that a
// stranger's flood of refused requests does not flood the log; the
// metrics count every one.
func (d *delivery) reject(ctx context.Context, status int, reason string, err error) {
	d.h.metrics.Rejections.WithLabelValues(d.spec.Source, reason).Inc()
	if reason == ReasonNoValidSignature {
		d.h.metrics.signatureMismatch(d.spec.Source, err)
	}
	telemetry.Annotate(ctx, telemetry.AttrOutcome.String("rejected"), telemetry.AttrRejection.String(reason))
	d.answer(status, response{Outcome: "rejected", Reason: reason})
	hint := d.spec.hintAttr(err)
	kind := []slog.Attr{slog.String("source", d.spec.Source), slog.String("reason", reason), slog.Int("status", status),
		slog.Bool("hinted", hint.Key != "")}
	d.h.rejected.Log(ctx, slog.LevelWarn, "delivery rejected", kind, "status", status, "reason", reason, "error", errText(err),
		"duration_ms", time.Since(d.start).Milliseconds(), hint)
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

// readBody reads the request's body within BODY_TIMEOUT of its headers,
// into buffers the unverified budget pays for as its bytes arrive. It
// answers the request itself when it cannot (ok false); otherwise the
// caller must call u.leave once the body is verified or refused.
func (d *delivery) readBody(ctx context.Context) (body []byte, u *unverified, ok bool) {
	h, req := d.h, d.req
	if h.bodyTimeout > 0 {
		// Errors only where the ResponseWriter cannot (a test's recorder);
		// the server's ReadTimeout still bounds the whole request there.
		_ = http.NewResponseController(d.w).SetReadDeadline(d.start.Add(h.bodyTimeout))
	}
	u = h.admission.enter(BlocksOfString(h.clientAddr(req)), d.w)
	body, err := u.read(ctx, http.MaxBytesReader(d.w, req.Body, h.maxBody), req.ContentLength, h.maxBody)
	if err == nil {
		u.doneReading()
		return body, u, true
	}
	u.leave()
	// Whatever is left of the body is not read: the connection is closed.
	d.w.Header().Set("Connection", "close")
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		d.reject(ctx, http.StatusRequestEntityTooLarge, "body_too_large", nil)
	case errors.Is(err, errCutOff), errors.Is(err, errOverShare), errors.Is(err, errAdmissionBusy):
		d.w.Header().Set("Retry-After", "1")
		d.reject(ctx, http.StatusServiceUnavailable, ReasonUnverifiedOverShare, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		d.reject(ctx, http.StatusRequestTimeout, ReasonBodyTimeout, nil)
	default:
		d.reject(ctx, http.StatusBadRequest, "body_unreadable", err)
	}
	return nil, nil, false
}

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
