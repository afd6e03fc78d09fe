package reconcile

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Reconciler is a provider's catch-up capability, offered by its package
// and registered in internal/providers beside its Spec: the command
// `server reconcile <Name>`, a job of the periodic reconciler, the
// console's action.
type Reconciler struct {
	// Name is the command's: `server reconcile <Name>`.
	Name string
	// Source is the Spec.Source of the provider whose events it catches up on.
	Source string
	// Flags are the flags it takes besides --dry-run, of "since", "resume",
	// "types" and "failed-only".
	Flags []string
	// Unconfigured says which of the provider's variables it lacks (its API
	// key), or "" when it can run. env reads the provider's variables.
	// Requires makes it of the variables' names.
	Unconfigured func(env func(string) string) string
	// New builds it. Its API client should be NewClient's, and each run
	// bounded by Bound (see the package's documentation).
	New func(Env) (Instance, error)
}

// Requires is the Unconfigured of a capability that needs the variables
// names set (its API key, and what else it reads): it says the first one
// that is unset ("PADDLE_API_KEY is unset"), or "" when all are. An
// endpoints.Provider's Unconfigured is the same function.
func Requires(names ...string) func(env func(string) string) string {
	return func(env func(string) string) string {
		for _, n := range names {
			if env(n) == "" {
				return n + " is unset"
			}
		}
		return ""
	}
}

// Takes reports whether the reconciler takes the flag.
func (r Reconciler) Takes(flag string) bool {
	for _, f := range r.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// Env is what a reconciler is built from.
type Env struct {
	Settings  webhooks.Settings // the provider's configuration
	Provider  webhooks.Provider // the provider deliveries go through
	Processor Processor
	Pool      *pgxpool.Pool
	Log       *slog.Logger
}

// Options are the options of one run, from the command line or the
// console; a reconciler uses those its Flags name.
type Options struct {
	Since      time.Duration
	Resume     bool
	Types      []string
	FailedOnly bool
	DryRun     bool
	// Settle leaves events younger than this to the next run: their
	// delivery may be under way. Zero: up to the newest event.
	Settle time.Duration
	// Trigger is recorded with the run: TriggerCLI by default.
	Trigger string
	// Out, when set, receives a line per event or finding, and progress on
	// long runs.
	Out io.Writer
	// OnEvent, when set, is called for every event listed, in order, with
	// what became of it (Events).
	OnEvent func(EventReport)
	// Progress, when set, is called with the summary so far after every
	// batch of events (Events).
	Progress func(EventSummary)
}

// Summary is what a run found and did.
type Summary interface {
	String() string
	// Missed counts what the run found that had never been delivered.
	Missed() int
}

// Instance runs reconciliations.
type Instance interface {
	Run(ctx context.Context, o Options) (Summary, error)
	// Job is its periodic job (RECONCILE_INTERVAL).
	Job() Job
}
