package reconcile

import (
	"context"
	"fmt"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Disposition is what a catch-up run did with one event of a provider's
// listing.
type Disposition string

const (
	DispKnown        Disposition = "known"         // claimed before this run: delivered, or reconciled earlier
	DispWouldProcess Disposition = "would_process" // dry run: unknown, it would be processed
	DispProcessed    Disposition = "processed"     // processed by this run, as a delivery would have been
	DispIgnored      Disposition = "ignored"       // claimed by this run; a type the receiver does not handle
	DispParked       Disposition = "parked"        // claimed by this run and parked for an operator
	DispStepFailed   Disposition = "step_failed"   // claimed and written by this run; a step failed and is retried by the redriver
	DispRaced        Disposition = "raced"         // claimed meanwhile by a delivery (duplicate or lease conflict)
	DispUnreadable   Disposition = "unreadable"    // not an event the provider can read (or one its API archived); skipped
	DispFailed       Disposition = "failed"        // not processed (the database failed); the next run retries it
)

// Counts are a catch-up run's events by Disposition, as its summary
// reports them (a provider's summary embeds them).
type Counts struct {
	Found        int `json:"found"`
	Known        int `json:"known"`
	WouldProcess int `json:"would_process,omitempty"`
	Processed    int `json:"processed"`
	Ignored      int `json:"ignored"`
	Parked       int `json:"parked"`
	StepFailed   int `json:"step_failed"`
	Raced        int `json:"raced"`
	Unreadable   int `json:"unreadable"`
	Failed       int `json:"failed"`
}

// Count counts one event found, by what became of it.
func (c *Counts) Count(d Disposition) {
	c.Found++
	switch d {
	case DispKnown:
		c.Known++
	case DispWouldProcess:
		c.WouldProcess++
	case DispProcessed:
		c.Processed++
	case DispIgnored:
		c.Ignored++
	case DispParked:
		c.Parked++
	case DispStepFailed:
		c.StepFailed++
	case DispRaced:
		c.Raced++
	case DispUnreadable:
		c.Unreadable++
	case DispFailed:
		c.Failed++
	}
}

// Missed is how many events the run found that had never been delivered
// and that the receiver handles.
func (c Counts) Missed() int { return c.Processed + c.Parked + c.StepFailed }

// Tally is the counts' figures for the record of runs and the metrics.
func (c Counts) Tally() Tally {
	return Tally{Found: c.Found, Missed: c.Missed(), Unresolved: c.Parked + c.Unreadable + c.Failed}
}

// Handle runs one listed event through proc as a delivery of prov would
// run, unless it is known (claimed before) or the run is a dry run, and
// says what became of it; an error comes with DispStepFailed and
// DispFailed.
func Handle(ctx context.Context, proc Processor, prov webhooks.Provider, ev webhooks.Event, known, dryRun bool) (Disposition, error) {
	switch {
	case known:
		return DispKnown, nil
	case dryRun:
		return DispWouldProcess, nil
	}
	res := proc.Process(ctx, prov, Reconciled(ev))
	switch res.Outcome {
	case webhooks.OutcomeProcessed:
		return DispProcessed, nil
	case webhooks.OutcomeIgnored:
		return DispIgnored, nil
	case webhooks.OutcomeParked:
		return DispParked, nil
	case webhooks.OutcomeStepFailed:
		return DispStepFailed, res.Err
	case webhooks.OutcomeDuplicate, webhooks.OutcomeLeaseConflict:
		return DispRaced, nil
	}
	err := res.Err
	if err == nil {
		err = fmt.Errorf("outcome %s", res.Outcome)
	}
	return DispFailed, err
}
