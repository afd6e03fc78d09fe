package webhooks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paywebhooks/receiver/internal/reqlog"
)

// Handler serves the webhook routes: it reads the raw body once, has the
// provider verify it, hands the event to the processor and turns the result
// into the status the sender acts on. It makes no business decision.
type Handler struct {
	proc    *Processor
	metrics *Metrics
	maxBody int64
	now     func() time.Time
}

// NewHandler returns a handler that accepts bodies up to maxBody bytes.
func NewHandler(proc *Processor, metrics *Metrics, maxBody int64) *Handler {
	return &Handler{proc: proc, metrics: metrics, maxBody: maxBody, now: time.Now}
}

// response is the JSON body of every answer to a delivery.
type response struct {
	Outcome string `json:"outcome"`
	Event   string `json:"event,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// versioned is implemented by providers whose events carry an API version.
type versioned interface{ APIVersion() string }

// Route returns the echo handler for prov's route.
func (h *Handler) Route(prov Provider) echo.HandlerFunc {
	source := prov.Source()
	return func(c echo.Context) error {
		req := c.Request()
		ctx := reqlog.Add(req.Context(), "source", source)
		c.SetRequest(req.WithContext(ctx))
		log := reqlog.From(ctx)

		body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, h.maxBody))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				h.metrics.Rejections.WithLabelValues(source, "body_too_large").Inc()
				log.Warn("delivery rejected", "reason", "body_too_large", "limit", h.maxBody)
				return c.JSON(http.StatusRequestEntityTooLarge, response{Outcome: "rejected", Reason: "body_too_large"})
			}
			h.metrics.Rejections.WithLabelValues(source, "body_unreadable").Inc()
			log.Warn("delivery rejected", "reason", "body_unreadable", "error", err)
			return c.JSON(http.StatusBadRequest, response{Outcome: "rejected", Reason: "body_unreadable"})
		}

		ev, err := prov.Verify(req.Header, body, h.now())
		if err != nil {
			reason := "invalid"
			var rej *RejectError
			if errors.As(err, &rej) {
				reason = rej.Reason
			}
			h.metrics.Rejections.WithLabelValues(source, reason).Inc()
			log.Warn("delivery rejected", "reason", reason, "error", err)
			return c.JSON(http.StatusBadRequest, response{Outcome: "rejected", Reason: reason})
		}
		h.metrics.secretMatched(source, ev.SecretIndex)
		ctx = reqlog.Add(ctx, "event_id", ev.ID, "event_type", ev.Type)
		c.SetRequest(req.WithContext(ctx)) // so the request's own log line carries them too
		log = reqlog.From(ctx)
		if v, ok := prov.(versioned); ok && ev.APIVersion != "" && ev.APIVersion != v.APIVersion() {
			h.metrics.APIVersionMismatch.WithLabelValues(source, ev.APIVersion).Inc()
			log.Debug("event in another API version", "api_version", ev.APIVersion, "expected", v.APIVersion())
		}

		// A verified event is processed to the end even if the sender hangs
		// up (GitHub gives up after 10 s and never redelivers): a claim cut
		// off half-way would only be rolled back and lost with it.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.proc.DeliveryTimeout())
		defer cancel()
		res := h.proc.Process(pctx, prov, ev)
		h.metrics.Deliveries.WithLabelValues(source, ev.Type, res.Outcome).Inc()
		body2 := response{Outcome: res.Outcome, Event: ev.ID}
		switch res.Outcome {
		case OutcomeProcessed, OutcomeDuplicate, OutcomeIgnored, OutcomeParked:
			log.Info("delivery answered", "outcome", res.Outcome)
			return c.JSON(http.StatusOK, body2)
		case OutcomeLeaseConflict:
			secs := int(res.RetryAfter / time.Second)
			c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
			log.Info("delivery answered: another worker holds the lease", "outcome", res.Outcome, "retry_after_s", secs)
			return c.JSON(http.StatusServiceUnavailable, body2)
		case OutcomeStepFailed:
			log.Warn("delivery answered: a step failed", "outcome", res.Outcome, "error", res.Err)
			return c.JSON(http.StatusBadGateway, body2)
		default:
			c.Response().Header().Set("Retry-After", "5")
			log.Error("delivery answered: not processed", "outcome", res.Outcome, "error", res.Err)
			return c.JSON(http.StatusServiceUnavailable, body2)
		}
	}
}
