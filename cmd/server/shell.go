package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// A command that runs steps (events replay, reconcile) runs them with its
// shell's configuration. Run with the server's own environment it works,
// warning as the server warns; it refuses only a shell that differs from
// what the running receivers use, which each records
// (internal/server/heartbeat.go): the fingerprints of the two are compared,
// and the refusal names each difference and the receivers that differ.

// allowMismatchFlag is the flag that runs steps with this shell's
// configuration even when it differs from the running receivers', under
// its name and its former one.
func allowMismatchFlag(c *command) *bool {
	allow := c.fs.Bool("allow-mismatch", false, "run steps with this shell's configuration even where it differs from the running receivers'")
	c.fs.BoolVar(allow, "allow-unconfigured", false, "the former name of --allow-mismatch")
	return allow
}

// refusedError is a command that refused to run, its shell being unlike the
// running receivers. Nothing was done: exit 2, as a usage error.
type refusedError struct{ msg string }

func (r refusedError) Error() string { return r.msg }

// logWeak logs the settings cfg accepts but should not have to.
func logWeak(cfg config.Config, log *slog.Logger) {
	for _, w := range cfg.Warnings {
		log.Warn("weak configuration", "variable", w.Var, "problem", w.Message)
	}
}

// logWarnings logs what the server logs at start-up of cfg: its weak
// settings and the providers'.
func logWarnings(cfg wiring.Setup, log *slog.Logger) {
	logWeak(cfg.Config, log)
	server.ProviderWarnings(cfg, providers.All(), log)
}

// checkShell decides whether a command that runs steps (what: "events
// replay runs steps") may run with this shell's configuration: with the
// running receivers' it does; with no running receiver recorded it warns and
// does; when they differ it refuses, unless allow, naming each difference
// and the receivers it differs from. What it says besides goes to stderr.
func checkShell(ctx context.Context, env operatorEnv, what string, allow bool, stderr io.Writer) error {
	logWarnings(env.cfg, env.log)
	recs, err := server.Receivers(ctx, env.pool)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable {
		fmt.Fprintln(stderr, "warning: this database's schema predates the record of running receivers (migration 15): "+
			"this shell's configuration cannot be compared with the server's; running with it")
		warnUnset(env.cfg.Config, stderr)
		return nil
	}
	if err != nil {
		return err
	}
	var live []server.Receiver
	for _, r := range recs {
		if r.Live {
			live = append(live, r)
		}
	}
	var shell config.Fingerprint
	if len(recs) > 0 {
		salt, err := server.FingerprintSalt(ctx, env.pool, false)
		if err != nil {
			return err
		}
		if shell, err = env.cfg.Fingerprint(salt); err != nil {
			return err
		}
	}
	if len(live) == 0 {
		fmt.Fprintf(stderr, "warning: no running receiver is recorded in this database (none seen within %s): "+
			"this shell's configuration cannot be compared with the server's; running with it\n", server.ReceiverLiveFor)
		if len(recs) > 0 {
			last := recs[0]
			when := "last seen " + last.Age.Round(time.Second).String() + " ago"
			if last.StoppedAt != nil {
				when = "stopped " + time.Since(*last.StoppedAt).Round(time.Second).String() + " ago"
			}
			if diffs := shell.Diff(last.Fingerprint); len(diffs) > 0 {
				fmt.Fprintf(stderr, "warning: the last receiver recorded, %s, %s, differed from this shell:\n%s", last, when, diffLines(diffs, "  "))
			} else {
				fmt.Fprintf(stderr, "the last receiver recorded, %s, %s, ran with this shell's configuration\n", last, when)
			}
		}
		warnUnset(env.cfg.Config, stderr)
		return nil
	}

	// The receivers that differ, grouped by how: a rolling deploy may run
	// two configurations at once.
	type group struct {
		diffs     []config.FingerprintDifference
		receivers []string
	}
	var differ []*group
	var same, notes []string
	for _, r := range live {
		var refusing []config.FingerprintDifference
		for _, d := range shell.Diff(r.Fingerprint) {
			if d.VerifyOnly {
				notes = append(notes, fmt.Sprintf("%s, against %s: only the verification of deliveries uses it, which no command does", d, r))
			} else {
				refusing = append(refusing, d)
			}
		}
		if len(refusing) == 0 {
			same = append(same, r.String())
			continue
		}
		key := diffLines(refusing, "")
		found := false
		for _, g := range differ {
			if diffLines(g.diffs, "") == key {
				g.receivers, found = append(g.receivers, r.String()), true
			}
		}
		if !found {
			differ = append(differ, &group{diffs: refusing, receivers: []string{r.String()}})
		}
	}
	for _, n := range notes {
		fmt.Fprintln(stderr, "note: "+n)
	}
	if len(differ) == 0 {
		fmt.Fprintf(stderr, "this shell's configuration is the running receivers' (%s): %s\n",
			plural(len(same), "receiver"), strings.Join(same, "; "))
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s with this shell's configuration, which differs from what the running receivers use:\n", what)
	for _, g := range differ {
		if len(differ) == 1 {
			b.WriteString(diffLines(g.diffs, "  "))
			fmt.Fprintf(&b, "receivers that differ: %s\n", strings.Join(g.receivers, "; "))
			continue
		}
		fmt.Fprintf(&b, "  from %s:\n%s", strings.Join(g.receivers, "; "), diffLines(g.diffs, "    "))
	}
	if len(same) > 0 {
		fmt.Fprintf(&b, "receivers this shell is like: %s\n", strings.Join(same, "; "))
	}
	if allow {
		fmt.Fprintf(stderr, "warning (--allow-mismatch): %s", b.String())
		return nil
	}
	b.WriteString("set this shell's variables as the receivers have them (run it with the server's environment), " +
		"or pass --allow-mismatch to run with this shell's anyway")
	return refusedError{b.String()}
}

// diffLines puts each difference on a line of its own, indented.
func diffLines(diffs []config.FingerprintDifference, indent string) string {
	var b strings.Builder
	for _, d := range diffs {
		b.WriteString(indent + d.String() + "\n")
	}
	return b.String()
}

// warnUnset says what this shell's steps will do that a server's rarely
// does, when there is no receiver to compare it with.
func warnUnset(cfg config.Config, stderr io.Writer) {
	if cfg.SMTPAddr == "" {
		dir, err := filepath.Abs(cfg.MailDir)
		if err != nil {
			dir = cfg.MailDir
		}
		fmt.Fprintf(stderr, "warning: SMTP_ADDR is unset: emails are written to %s, not sent\n", dir)
	}
	if cfg.FulfillmentURL == "" {
		fmt.Fprintln(stderr, "warning: FULFILLMENT_URL is unset: fulfillment steps cannot run (parked ones stay parked, new ones are skipped)")
	}
}
