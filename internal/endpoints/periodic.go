package endpoints

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
)

// LockName is the name of the periodic check's lock, among the
// reconcilers' (reconcile.Store.Lock): one replica at a time runs it.
const LockName = "endpoints"

// Periodic is the check the server runs by itself every
// RECONCILE_INTERVAL, as a job of reconcile.Runner: under a PostgreSQL
// advisory lock, so that one replica at a time reads the providers' APIs,
// it runs the check without changing anything and hands the problems it
// found to Note, which raises the endpoint alert once per finding and
// hour (internal/alerts). Notes (events sent that nothing handles) are
// not handed on: they are a cost, not an error.
type Periodic struct {
	Check *Check
	// Lock takes the check's lock (reconcile.Store.Lock with LockName),
	// or returns reconcile.ErrBusy.
	Lock func(ctx context.Context, name string) (release func(), err error)
	// Note receives the problems of every run that read the providers,
	// none included (what was wrong and is right again is no longer
	// noted), and when they were found.
	Note func(at time.Time, problems []Finding)
	// Out, when set, receives the report of every run.
	Out io.Writer
	// Now is the clock the problems are noted with; nil: time.Now.
	Now func() time.Time
}

// Job is the periodic check as a job of reconcile.Runner.
func (p *Periodic) Job() reconcile.Job { return reconcile.Job{Source: LockName, Run: p.Run} }

// Run runs the check once: reconcile.ErrBusy when another replica is
// running it; an error naming the providers whose check failed (their
// problems are not noted this time). The tally counts the endpoints that
// send to the receiver (Found) and the problems (Unresolved).
func (p *Periodic) Run(ctx context.Context) (reconcile.Tally, error) {
	release, err := p.Lock(ctx, LockName)
	if err != nil {
		return reconcile.Tally{}, err
	}
	defer release()
	r, err := p.Check.Run(ctx, Options{})
	if err != nil {
		return reconcile.Tally{}, err
	}
	if p.Out != nil {
		_ = r.Write(p.Out)
	}
	var t reconcile.Tally
	var problems []Finding
	var failed []string
	for _, s := range r.Providers {
		t.Found += s.Endpoints
		if s.Error != "" {
			failed = append(failed, s.Source+": "+s.Error)
		}
	}
	for _, f := range r.Remaining {
		if !f.Note {
			problems = append(problems, f)
		}
	}
	t.Unresolved = len(problems)
	if p.Note != nil {
		now := time.Now
		if p.Now != nil {
			now = p.Now
		}
		p.Note(now(), problems)
	}
	if len(failed) > 0 {
		return t, fmt.Errorf("endpoints check: %w", errors.New(strings.Join(failed, "; ")))
	}
	return t, nil
}
