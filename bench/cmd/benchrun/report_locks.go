package main

import (
	"debug/buildinfo"
	"fmt"
	"strings"
)

// limitSection sets the receiver beside pgbench at the same concurrency:
// the snippet's SQL on its tables at -concurrency clients and at one, and
// the receiver's own statements (P).
func (r *report) limitSection() string {
	if !r.ran[1] || len(r.p1) == 0 {
		return ""
	}
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	c := r.o.concurrency
	recv := pooled(r.p1[sRecv], r.p1[sRecv2])
	p("## The limit at the same concurrency\n\n")
	p("pgbench in phase 1's rounds, beside the receiver: (c1), the snippet's SQL in one transaction on the snippet's own\n")
	p("tables, at %d clients (the HTTP phases' concurrency) and at 1; P, pgbench (a), the receiver's own statements for a new\n", c)
	p("invoice.created (claim with its %d-byte body, invoice, customer's address; one pipelined implicit transaction) at\n", r.pgbenchBody)
	p("%d clients: what PostgreSQL alone does with the receiver's work, so that receiver ÷ P is what the HTTP path, the\n", c)
	p("verification and Go cost on this machine.\n\n")
	p("| | tps or 2xx/s (median) | receiver ÷ it (median of rounds) | spread |\n|---|---:|---:|---|\n")
	p("| receiver | %.0f | | |\n", medianOf(recv, rateOf))
	for _, s := range []string{sPgC1, sPgC1One, sPgA, sPgB, sPgC} {
		if len(r.p1[s]) == 0 {
			continue
		}
		rs := summarize(perRound(values(r.p1[sRecv], rateOf), values(r.p1[s], rateOf)))
		p("| %s | %.0f | %.2f | %s |\n", s, medianOf(r.p1[s], rateOf), rs.Median, rs.spread("%.2f"))
	}
	p("\n")
	return sb.String()
}

// burstSection is phase 8's ratios beyond its targets.
func (r *report) burstSection() string {
	if !r.ran[8] || len(r.p8) == 0 {
		return ""
	}
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	p("## Phase 8: a customer's burst\n\n")
	p("loadgen `-event burst` sends the seven events of each Checkout of a subscription in turn, as Stripe sends them\n")
	p("within a second: checkout.session.completed, customer.created (of a customer seen before: customer.updated),\n")
	p("customer.subscription.created, invoice.created, invoice.finalized, invoice.paid, payment_intent.succeeded, each\n")
	p("naming the checkout's customer and its own objects; at concurrency %d, two or three checkouts are in flight at\n", r.o.concurrency)
	p("once. The receiver (database burst, no FULFILLMENT_URL: the confirmation and receipt emails are written to\n")
	p("MAIL_DIR, the fulfillment step is recorded skipped) runs every side but the snippet's: a customer per checkout, every\n")
	p("checkout one customer's (`-customers 1`, twice per round: the A/A control), every checkout one of %d customers'\n", burstFew)
	p("(`-customers %d`). The net/http snippet (database bsnip, its own tables) is sent the same events: it claims each and\n", burstFew)
	p("inserts the invoice of invoice.created and .finalized, and does nothing of the rest.\n\n")
	if len(r.p8[sBaseOne]) > 0 {
		p("With `-base-server`, a baseline build of the receiver (%s) ran in the same rounds on a database of its own\n", r.baseline())
		p("(bburst), sent a customer per checkout and one customer's checkouts: the rows \"baseline\".\n\n")
	}
	p("| ratio | median | spread |\n|---|---:|---|\n")
	for _, c := range [][2]string{
		{sBurstOne, sBurstAll}, {sBurstFew, sBurstAll}, {sBurstOne, sBurst1b}, {sBurstAll, sBurstNet}, {sBurstOne, sBurstNet},
		{sBaseOne, sBaseAll}, {sBurstOne, sBaseOne}, {sBurstAll, sBaseAll}, {sBaseOne, sBurst1b},
	} {
		s := summarize(perRound(values(r.p8[c[0]], rateOf), values(r.p8[c[1]], rateOf)))
		if s.ok() {
			p("| %s ÷ %s | %.2f | %s |\n", c[0], c[1], s.Median, s.spread("%.2f"))
		}
	}
	p("\n")
	return sb.String()
}

// lockSection is every side's lock waits, from the sampler.
func (r *report) lockSection() string {
	if r.o.lockSample <= 0 {
		return ""
	}
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	var rows []string
	for _, ph := range r.phases() {
		for _, name := range sideOrder(ph.s) {
			t := totals(ph.s[name])
			l := t.locks
			if l.samples == 0 {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %d | %.1f | %.2f | %.1f %% | %s |", ph.name, name, l.samples,
				float64(l.active)/float64(l.samples), float64(l.total())/float64(l.samples), 100*max(l.share(), 0), l.text()))
		}
	}
	if len(rows) == 0 {
		return ""
	}
	p("## Lock waits\n\n")
	p("pg_stat_activity sampled every %s over each measured slot (the whole cluster: one side runs at a time): the\n", r.o.lockSample)
	p("active client backends, and those of them waiting for a heavyweight lock (`wait_event_type` Lock), by what they\n")
	p("waited for: `transactionid` or `tuple` is another transaction's row (its commit), `extend` a relation's extension,\n")
	p("`advisory` an advisory lock. Summed over a side's slots.\n\n")
	p("| phase | side | samples | active backends, mean | waiting for a lock, mean | share of active | waiting for |\n|---|---|---:|---:|---:|---:|---|\n")
	sb.WriteString(strings.Join(rows, "\n"))
	p("\n\n")
	return sb.String()
}

// groupCommitSection is the WAL flushes per commit of phase 1's windows.
func (r *report) groupCommitSection() string {
	var gs []groupCommit
	for _, c := range r.cost1 {
		if c.flush.commits > 0 {
			gs = append(gs, c.flush)
		}
	}
	gs = append(gs, r.flushes1...)
	if len(gs) == 0 {
		return ""
	}
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	p("## Group commit\n\n")
	p("WAL flushes per commit at concurrency %d: the cluster's flushes (`pg_stat_wal.wal_sync`) against the database's\n", r.o.concurrency)
	p("commits (`pg_stat_database.xact_commit`), read with the database's connections gone before and after (a backend\n")
	p("adds its counts when it exits, or at most once a second: read while it is connected they would lag), over the\n")
	p("servers' cost windows (the whole life of each, warm-up included, through the counting proxy) and a window of %s\n", r.o.costTime)
	p("of pgbench alone. Under group commit one flush makes several commits durable: flushes per commit below 1.\n\n")
	p("| window | commits | WAL flushes | flushes per commit | commits per flush |\n|---|---:|---:|---:|---:|\n")
	for _, g := range gs {
		per := "—"
		if g.flushes > 0 {
			per = fmt.Sprintf("%.2f", float64(g.commits)/float64(g.flushes))
		}
		p("| %s | %d | %d | %.2f | %s |\n", g.side, g.commits, g.flushes, g.perCommit(), per)
	}
	p("\n")
	return sb.String()
}

// baseline names the baseline build (-base-server) and, with
// -base-drop-indexes, the indexes its databases went without.
func (r *report) baseline() string {
	s := binaryVersion(r.o.baseServer)
	if len(r.o.baseDropIndexes) > 0 {
		s += "; its databases dropped " + strings.Join(r.o.baseDropIndexes, ", ") +
			" once it had migrated them (-base-drop-indexes: an ablation)"
	}
	return s
}

// binaryVersion is the version a receiver binary was built as (its main
// module's, or the -X version stamped by make build), or its path.
func binaryVersion(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return path
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 7 {
			return path + ", commit " + s.Value[:7]
		}
	}
	return path
}
