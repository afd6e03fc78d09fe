package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/bench/pgbench"
	"github.com/paywebhooks/receiver/internal/pgbouncer"
)

// Side names, as the report shows them.
const (
	sRecv     = "receiver"
	sRecv2    = "receiver′"
	sNet      = "snippet (net/http)"
	sNetR     = "snippet (net/http), receiver's schema"
	sSnip     = "snippet (Echo)"
	sPgA      = "pgbench (a) = P"
	sPgB      = "pgbench (b)"
	sPgC      = "pgbench (c)"
	sPgC1     = "pgbench (c1)"
	sPgC1One  = "pgbench (c1), 1 client"
	sBase     = "receiver, small table"
	sBase2    = "receiver, small table′"
	sGrown    = "receiver, grown table"
	sBurstAll = "receiver, a customer per checkout"
	sBurstOne = "receiver, one customer"
	sBurst1b  = "receiver, one customer′"
	sBurstFew = "receiver, 4 customers"
	sBurstNet = "snippet (net/http), the same events"
	sPgAX     = "pgbench (a), unprepared"
	sPgC1X    = "pgbench (c1), unprepared"
	sBase1    = "baseline"
	sBaseAll  = "baseline, a customer per checkout"
	sBaseOne  = "baseline, one customer"
	stepsAPI  = 200 * time.Millisecond // the fake fulfillment API's answer time
)

// burstFew is the handful of customers of phase 8's third side.
const burstFew = 4

// phase1Scripts are phase 1's pgbench sides, in the order they are listed:
// at the phases' concurrency, but for (c1)'s one client beside it.
var phase1Scripts = []struct {
	side    string
	script  pgbench.Script
	clients int // 0: -concurrency
}{
	{sPgC1, pgbench.SnippetNewTx, 0},
	{sPgC1One, pgbench.SnippetNewTx, 1},
	{sPgA, pgbench.ReceiverNew, 0},
	{sPgB, pgbench.MinimalNew, 0},
	{sPgC, pgbench.SnippetNew, 0},
}

// pgbenchDB is the database script runs on: the snippet's tables or the
// receiver's schema.
func pgbenchDB(sc pgbench.Script) string {
	if sc.Snippet {
		return "pgbsnip"
	}
	return "pgb"
}

// absRounds is the rounds of the phases that measure the receiver alone
// (A and A′ only): fewer, as each round has two slots.
func (b *bench) absRounds() int { return max(2, (b.o.rounds+1)/2) }

func (b *bench) loadSide(name string, s *server, a loadArgs) side {
	a.warmup = b.o.slotWarmup
	return side{name, func(ctx context.Context) (sample, error) { return b.loadgen(ctx, s, a, b.o.slot) }}
}

func (b *bench) warm(ctx context.Context, s *server, a loadArgs) error {
	_, err := b.loadgen(ctx, s, a, b.o.warmup)
	return err
}

// phase1: new invoice.created events (database only). The receiver, the
// snippets and pgbench's scripts alternate; the receiver runs twice per
// round for the A/A control. Then the cost windows of the three servers,
// and pgbench's (a) and (c1) once more, alone, for their flushes per commit.
func (b *bench) phase1(ctx context.Context) error {
	c := b.o.concurrency
	logf("phase 1: new invoice.created events at concurrency %d: receiver, snippet (net/http) on its tables and on the receiver's, snippet (Echo), pgbench (c1) at %d clients and at 1, (a) (b) (c); %d rounds of %s slots", c, c, b.o.rounds, b.o.slot)
	recv, err := b.startReceiver(ctx, "receiver", "recv", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)})
	if err != nil {
		return err
	}
	defer recv.stop()
	net, err := b.startSnippet(ctx, sNet, b.o.snippetNet, b.url("nsnip"), c)
	if err != nil {
		return err
	}
	defer net.stop()
	netR, err := b.startSnippet(ctx, sNetR, b.o.snippetNet, b.url("nsnipr"), c)
	if err != nil {
		return err
	}
	defer netR.stop()
	snip, err := b.startSnippet(ctx, sSnip, b.o.snippet, b.url("snip"), c)
	if err != nil {
		return err
	}
	defer snip.stop()
	a := loadArgs{event: "invoice", concurrency: c}
	for _, s := range []*server{recv, net, netR, snip} {
		if err := b.warm(ctx, s, a); err != nil {
			return err
		}
	}
	sides := []side{b.loadSide(sRecv, recv, a), b.loadSide(sNet, net, a), b.loadSide(sNetR, netR, a), b.loadSide(sSnip, snip, a),
		b.loadSide(sRecv2, recv, a)}
	if b.o.baseServer != "" {
		base, err := b.startBase(ctx, "baseline", "brecv", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)})
		if err != nil {
			return err
		}
		defer base.stop()
		if err := b.warm(ctx, base, a); err != nil {
			return err
		}
		sides = append(sides, b.loadSide(sBase1, base, a))
	}
	for _, p := range phase1Scripts {
		clients := cmp.Or(p.clients, c)
		if _, err := b.pgbench(ctx, pgbenchDB(p.script), p.script, clients, 2*time.Second); err != nil {
			return err
		}
		sides = append(sides, side{p.side, func(ctx context.Context) (sample, error) {
			return b.pgbench(ctx, pgbenchDB(p.script), p.script, clients, b.o.slot)
		}})
	}
	b.resetStatements(ctx, "recv", "nsnip", "nsnipr", "snip")
	var perfDone func() string
	if b.o.perf {
		perfDone = startPerf(recv.pid, filepath.Join(b.tmp, "perf-phase1"))
	}
	b.rep.p1, err = b.alternate(ctx, "1", b.o.rounds, sides)
	if perfDone != nil {
		b.rep.perf = perfDone()
	}
	b.keepStatements(ctx, "1 receiver (database recv)", "recv")
	b.keepStatements(ctx, "1 snippet, net/http (database nsnip, its own tables)", "nsnip")
	b.keepStatements(ctx, "1 snippet, net/http, on the receiver's schema (database nsnipr)", "nsnipr")
	b.keepStatements(ctx, "1 snippet, Echo (database snip, its own tables)", "snip")
	if err != nil || !b.o.cost {
		return err
	}
	for _, s := range []*server{recv, net, netR, snip} {
		s.stop()
	}
	b.rep.cost1 = b.costWindows(ctx, "1", []costSpec{
		{sRecv, kindReceiver, "recv", a}, {sNet, kindNet, "nsnip", a}, {sSnip, kindEcho, "snip", a},
	})
	for _, p := range []struct {
		side   string
		script pgbench.Script
	}{{sPgA, pgbench.ReceiverNew}, {sPgC1, pgbench.SnippetNewTx}} {
		db := pgbenchDB(p.script)
		g, err := b.pgbenchFlushes(ctx, p.side, db, func(ctx context.Context) (sample, error) {
			return b.pgbench(ctx, db, p.script, c, b.o.costTime)
		})
		if err != nil {
			logf("  1 flushes %-30s failed: %v", p.side, err)
			continue
		}
		logf("  1 flushes %-30s %d transactions, %d commits, %d WAL flushes: %.2f per commit", p.side, g.deliveries, g.commits, g.flushes, g.perCommit())
		b.rep.flushes1 = append(b.rep.flushes1, g)
	}
	return nil
}

// warming is a server and the load that warms it before a phase's rounds.
type warming struct {
	s *server
	a loadArgs
}

// phase8: a customer's burst. loadgen sends the seven events of each
// Checkout of a subscription in turn (-event burst), every event naming the
// checkout's customer: to the receiver with a customer of its own per
// checkout, with every checkout one customer's (twice per round, the A/A
// control), with every checkout one of a handful of customers', and to the
// net/http snippet (which claims every event and inserts the invoices of
// invoice.created and .finalized).
func (b *bench) phase8(ctx context.Context) error {
	c := b.o.concurrency
	logf("phase 8: a customer's burst (the seven events of each checkout) at concurrency %d: receiver with a customer per checkout, with one customer, with %d customers, snippet (net/http); %d rounds", c, burstFew, b.o.rounds)
	recv, err := b.startReceiver(ctx, "receiver (burst)", "burst", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)})
	if err != nil {
		return err
	}
	defer recv.stop()
	net, err := b.startSnippet(ctx, sNet+" (burst)", b.o.snippetNet, b.url("bsnip"), c)
	if err != nil {
		return err
	}
	defer net.stop()
	all := loadArgs{event: "burst", concurrency: c}
	one := loadArgs{event: "burst", concurrency: c, customers: 1}
	few := loadArgs{event: "burst", concurrency: c, customers: burstFew}
	warm := []warming{{recv, all}, {recv, one}, {recv, few}, {net, all}}
	sides := []side{
		b.loadSide(sBurstAll, recv, all), b.loadSide(sBurstOne, recv, one), b.loadSide(sBurstFew, recv, few),
		b.loadSide(sBurstNet, net, all), b.loadSide(sBurst1b, recv, one),
	}
	if b.o.baseServer != "" {
		base, err := b.startBase(ctx, "baseline (burst)", "bburst", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)})
		if err != nil {
			return err
		}
		defer base.stop()
		warm = append(warm, warming{base, all}, warming{base, one})
		sides = append(sides, b.loadSide(sBaseAll, base, all), b.loadSide(sBaseOne, base, one))
	}
	for _, w := range warm {
		if err := b.warm(ctx, w.s, w.a); err != nil {
			return err
		}
	}
	b.resetStatements(ctx, "burst")
	b.rep.p8, err = b.alternate(ctx, "8", b.o.rounds, sides)
	b.keepStatements(ctx, "8 receiver: a customer's burst (database burst)", "burst")
	return err
}

// phase2: replays of finished events: the receiver against the snippets'
// replays, each replaying a fixed pool of events it has finished. Then the
// cost windows of the three servers.
func (b *bench) phase2(ctx context.Context) error {
	c := b.o.concurrency
	const pool = 500
	logf("phase 2: replays of %d finished events at concurrency %d: receiver, snippet (net/http), snippet (Echo); %d rounds", pool, c, b.o.rounds)
	recv, err := b.startReceiver(ctx, "receiver (replays)", "recv", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)})
	if err != nil {
		return err
	}
	defer recv.stop()
	net, err := b.startSnippet(ctx, sNet+" (replays)", b.o.snippetNet, b.url("nsnip"), c)
	if err != nil {
		return err
	}
	defer net.stop()
	snip, err := b.startSnippet(ctx, sSnip+" (replays)", b.o.snippet, b.url("snip"), c)
	if err != nil {
		return err
	}
	defer snip.stop()
	ra := loadArgs{event: "invoice", concurrency: c, pool: pool, seed: 11}
	sa := loadArgs{event: "invoice", concurrency: c, pool: pool, seed: 12}
	na := loadArgs{event: "invoice", concurrency: c, pool: pool, seed: 13}
	warm := []warming{{recv, ra}, {net, na}, {snip, sa}}
	sides := []side{b.loadSide(sRecv, recv, ra), b.loadSide(sNet, net, na), b.loadSide(sSnip, snip, sa), b.loadSide(sRecv2, recv, ra)}
	// With -base-server, the baseline build replays a pool of its own in
	// the same rounds, on phase 1's baseline database (brecv, which it
	// migrated itself).
	if b.o.baseServer != "" {
		base, err := b.startBase(ctx, "baseline (replays)", "brecv", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)})
		if err != nil {
			return err
		}
		defer base.stop()
		ba := loadArgs{event: "invoice", concurrency: c, pool: pool, seed: 14}
		warm = append(warm, warming{base, ba})
		sides = append(sides, b.loadSide(sBase1, base, ba))
	}
	// Each pool is sent once as new events, then replayed for the warm-up.
	for _, w := range warm {
		primed := w.a
		primed.prime = pool
		if err := b.warm(ctx, w.s, primed); err != nil {
			return err
		}
	}
	b.resetStatements(ctx, "recv", "nsnip", "snip")
	b.rep.p2, err = b.alternate(ctx, "2", b.o.rounds, sides)
	b.keepStatements(ctx, "2 receiver: replays (database recv)", "recv")
	if err != nil || !b.o.cost {
		return err
	}
	for _, s := range []*server{recv, net, snip} {
		s.stop()
	}
	b.rep.cost2 = b.costWindows(ctx, "2", []costSpec{
		{sRecv, kindReceiver, "recv", ra}, {sNet, kindNet, "nsnip", na}, {sSnip, kindEcho, "snip", sa},
	})
	return nil
}

// phase7: new invoice.created events through a PgBouncer in transaction
// mode (pool size -concurrency per database): the receiver against the
// net/http snippet, both through the same pooler, the receiver twice per
// round for the A/A control; and pgbench's (a) and (c1) through it in the
// extended protocol, nothing prepared, as PgBouncer 1.18 requires.
func (b *bench) phase7(ctx context.Context) error {
	c := b.o.concurrency
	logf("phase 7: new invoice.created events through PgBouncer (transaction mode) at concurrency %d: receiver, snippet (net/http), pgbench (a) and (c1) unprepared; %d rounds", c, b.o.rounds)
	logFile, err := os.Create(filepath.Join(b.tmp, "pgbouncer.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	bouncer, err := pgbouncer.Start(ctx, pgbouncer.Options{Upstream: b.cluster.URL("postgres"), PoolSize: c, Log: logFile})
	if err != nil {
		return err
	}
	defer bouncer.Stop()
	b.cpu.pooler = bouncer.PID()
	defer func() { b.cpu.pooler = 0 }()
	if bin, err := pgbouncer.Find(); err == nil {
		out, _ := exec.Command(bin, "--version").Output()
		b.rep.poolerVersion, _, _ = strings.Cut(string(out), "\n")
	}

	// The receiver as a user configures it behind a transaction-mode
	// pooler: DATABASE_POOLER=transaction (no named statements; its URL
	// names no query exec mode, so the receiver picks its own), its
	// migrations and locks on a direct session.
	recv, err := b.startReceiver(ctx, "receiver (PgBouncer)", "precv", map[string]string{
		"DATABASE_URL": bouncer.PlainURL("precv"), "DATABASE_POOLER": "transaction",
		"DATABASE_SESSION_URL": b.url("precv"), "DB_MAX_CONNS": strconv.Itoa(c),
	})
	if err != nil {
		return err
	}
	defer recv.stop()
	// The snippet through the same pooler: pgx's statement cache cannot
	// work through a transaction-mode PgBouncer 1.18, so its URL names the
	// exec mode too, as a user's must.
	net, err := b.startSnippet(ctx, sNet+" (PgBouncer)", b.o.snippetNet, bouncer.URL("psnip"), c)
	if err != nil {
		return err
	}
	defer net.stop()
	a := loadArgs{event: "invoice", concurrency: c}
	for _, s := range []*server{recv, net} {
		if err := b.warm(ctx, s, a); err != nil {
			return err
		}
	}
	// pgbench through the same pooler, in the extended protocol's unnamed
	// statements (-M extended): what PostgreSQL does with the receiver's
	// and the snippet's SQL when nothing can be prepared.
	sides := []side{b.loadSide(sRecv, recv, a), b.loadSide(sNet, net, a), b.loadSide(sRecv2, recv, a)}
	if b.o.baseServer != "" {
		base, err := b.startBase(ctx, "baseline (PgBouncer)", "bprecv", map[string]string{
			"DATABASE_URL": bouncer.PlainURL("bprecv"), "DATABASE_POOLER": "transaction",
			"DATABASE_SESSION_URL": b.url("bprecv"), "DB_MAX_CONNS": strconv.Itoa(c),
		})
		if err != nil {
			return err
		}
		defer base.stop()
		if err := b.warm(ctx, base, a); err != nil {
			return err
		}
		sides = append(sides, b.loadSide(sBase1, base, a))
	}
	for _, p := range []struct {
		side   string
		script pgbench.Script
	}{{sPgAX, pgbench.ReceiverNew}, {sPgC1X, pgbench.SnippetNewTx}} {
		url := bouncer.PlainURL(pgbenchDB(p.script))
		if _, err := b.pgbenchOn(ctx, url, "extended", p.script, c, 2*time.Second); err != nil {
			return err
		}
		sides = append(sides, side{p.side, func(ctx context.Context) (sample, error) {
			return b.pgbenchOn(ctx, url, "extended", p.script, c, b.o.slot)
		}})
	}
	b.resetStatements(ctx, "precv", "psnip")
	b.rep.p7, err = b.alternate(ctx, "7", b.o.rounds, sides)
	b.keepStatements(ctx, "7 receiver through PgBouncer (database precv)", "precv")
	b.keepStatements(ctx, "7 snippet, net/http, through PgBouncer (database psnip)", "psnip")
	return err
}

// phase3: checkout.session.completed (paid) with a fulfillment API
// answering in 200 ms: 64 concurrent deliveries, 8 database connections.
func (b *bench) phase3(ctx context.Context) error {
	const conc, conns = 64, 8
	logf("phase 3: checkout events, fulfillment API answering in %s, concurrency %d, DB_MAX_CONNS=%d; %d rounds", stepsAPI, conc, conns, b.absRounds())
	api, err := startFulfillmentAPI(stepsAPI)
	if err != nil {
		return err
	}
	defer api.close()
	sink, err := startSMTPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	recv, err := b.startReceiver(ctx, "receiver (steps)", "steps", map[string]string{
		"DB_MAX_CONNS":    strconv.Itoa(conns),
		"FULFILLMENT_URL": api.url(),
		"SMTP_ADDR":       sink.addr,
	})
	if err != nil {
		return err
	}
	defer recv.stop()
	a := loadArgs{event: "checkout", concurrency: conc}
	if err := b.warm(ctx, recv, a); err != nil {
		return err
	}
	api.reset()
	mails := sink.count()
	b.resetStatements(ctx, "steps")
	b.rep.p3, err = b.alternate(ctx, "3", b.absRounds(), []side{b.loadSide(sRecv, recv, a), b.loadSide(sRecv2, recv, a)})
	b.rep.stepsAPI, b.rep.stepsMails = api.stats(), sink.count()-mails
	b.keepStatements(ctx, "3 receiver: checkout with steps (database steps)", "steps")
	return err
}

// phase5: peak memory at 256 deliveries in flight, then the p99 latency
// at a fixed arrival rate of half the peak throughput.
func (b *bench) phase5(ctx context.Context) error {
	const conc = 256
	c := b.o.concurrency
	logf("phase 5: %d concurrent deliveries for %s, then a fixed rate at half the peak", conc, b.o.window)
	recv, err := b.startReceiver(ctx, "receiver (memory)", "mem", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)})
	if err != nil {
		return err
	}
	defer recv.stop()
	a := loadArgs{event: "invoice", concurrency: conc}
	if err := b.warm(ctx, recv, a); err != nil {
		return err
	}
	stopMem := sampleMemory(recv.pid)
	a.warmup = b.o.slotWarmup
	s, err := b.loadgen(ctx, recv, a, b.o.window)
	b.rep.rss = stopMem()
	if err != nil {
		return err
	}
	b.rep.conc256 = s
	logf("  5  %-37s %s  peak RSS %.1f MiB", "receiver, 256 in flight", s.line(), float64(b.rep.rss)/mib)

	peak := s.rate
	if p := summarize(values(pooled(b.rep.p1[sRecv], b.rep.p1[sRecv2]), rateOf)); p.ok() {
		peak = max(peak, p.Median)
	}
	rate := peak / 2
	b.rep.halfRate = rate
	logf("  5  fixed rate %.0f/s (half of %.0f/s); %d rounds", rate, peak, b.absRounds())
	ra := loadArgs{event: "invoice", rate: rate}
	b.rep.p5, err = b.alternate(ctx, "5", b.absRounds(), []side{b.loadSide(sRecv, recv, ra), b.loadSide(sRecv2, recv, ra)})
	if err != nil {
		return err
	}
	// The control: can the database itself commit the receiver's
	// transactions at that rate with a p99 under 25 ms on this machine?
	b.rep.pgbRateP99, err = b.pgbenchRateP99(ctx, "pgb", pgbench.ReceiverNew, c, rate, b.o.window)
	if err == nil {
		logf("  5  %-37s p99 %.1fms", fmt.Sprintf("pgbench (a) at %.0f/s", rate), b.rep.pgbRateP99)
	}
	return err
}

// phase4: growth. processed_events of a database of its own gets -rows rows
// (events with their body and the other new columns, a third of them
// checkout events' steps); then the receiver on it and on phase 1's
// database alternate.
func (b *bench) phase4(ctx context.Context) error {
	c := b.o.concurrency
	if err := b.bulkLoad(ctx); err != nil {
		return err
	}
	b.rep.grow.baseRows = b.countRows(ctx, "recv")
	b.rep.grow.grownRows = b.countRows(ctx, "grown")
	logf("phase 4: growth; the receiver on %d rows and on %d rows; %d rounds", b.rep.grow.baseRows, b.rep.grow.grownRows, b.o.rounds)
	env := map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)}
	base, err := b.startReceiver(ctx, "receiver (small table)", "recv", env)
	if err != nil {
		return err
	}
	defer base.stop()
	grown, err := b.startReceiver(ctx, "receiver (grown table)", "grown", env)
	if err != nil {
		return err
	}
	defer grown.stop()
	a := loadArgs{event: "invoice", concurrency: c}
	for _, s := range []*server{base, grown} {
		if err := b.warm(ctx, s, a); err != nil {
			return err
		}
	}
	b.resetStatements(ctx, "grown")
	b.rep.p4, err = b.alternate(ctx, "4", b.o.rounds, []side{
		b.loadSide(sBase, base, a), b.loadSide(sGrown, grown, a), b.loadSide(sBase2, base, a),
	})
	b.keepStatements(ctx, "4 receiver: grown table (database grown)", "grown")
	return err
}

// bulkLoad fills processed_events of the grown database: -rows rows, two
// thirds events (every new column filled; keys like Stripe's, random after
// evt_1, so that new events land all over the index) and one third the
// steps of every fourth event (a checkout: its confirmation e-mail and its
// fulfillment, done). Rows go in in key order, so that the load is fast.
func (b *bench) bulkLoad(ctx context.Context) error {
	events := (b.o.rows*2 + 2) / 3
	body := `convert_to('{"id":"' || k || '","object":"event","api_version":"2023-10-16","type":"' || t ||
           '","data":{"object":{"id":"in_' || substr(k, 6) || '","object":"invoice"}}}', 'UTF8')`
	if b.o.growBody == "full" {
		i := strings.Index(b.invoiceBody, `"id": "`)
		if i < 0 || strings.Contains(b.invoiceBody, "$body$") {
			return errors.New("-grow-body full: loadgen's invoice body has no id")
		}
		id, _, _ := strings.Cut(b.invoiceBody[i+7:], `"`)
		body = fmt.Sprintf(`convert_to(replace($body$%s$body$, %s, k), 'UTF8')`, b.invoiceBody, quoteLiteral(id))
	}
	// The keys are sorted alone; the wide columns are computed after the
	// sort, row by row.
	sql := fmt.Sprintf(`
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type,
                              api_version, body, outcome, via, parent_key, step, step_kind, payload, claim_token, attempts)
SELECT event_key, 'stripe', 'done', kind, now(), now(),
       CASE WHEN kind = 'event' THEN k END,
       CASE WHEN kind = 'event' THEN t END,
       CASE WHEN kind = 'event' THEN '2023-10-16' END,
       CASE WHEN kind = 'event' THEN %s END,
       CASE WHEN kind = 'event' THEN 'processed' END,
       CASE WHEN kind = 'event' THEN 'delivery' END,
       CASE WHEN kind = 'step' THEN k END,
       step,
       CASE step WHEN 'fulfillment' THEN 'fulfillment' WHEN 'email.confirmation' THEN 'email' END,
       CASE step
           WHEN 'fulfillment' THEN '{"order":{"id":1,"source":"stripe","external_id":"cs_x","amount_cents":3000,"currency":"usd","customer_email":"ada.lovelace@example.com"}}'::jsonb
           WHEN 'email.confirmation' THEN '{"to":"ada.lovelace@example.com","template":"order_confirmation","data":{"OrderID":1,"ExternalID":"cs_x","AmountCents":3000,"Currency":"usd"}}'::jsonb
       END,
       CASE WHEN kind = 'step' THEN 1 ELSE 0 END,
       CASE WHEN kind = 'step' THEN 1 ELSE 0 END
FROM (
    SELECT k AS event_key, 'event' AS kind, k, t, NULL AS step FROM keys
    UNION ALL
    SELECT k || '/' || st.step, 'step', k, t, st.step
    FROM keys CROSS JOIN (VALUES ('email.confirmation'), ('fulfillment')) st(step)
    WHERE t = 'checkout.session.completed'
    ORDER BY 1
) rows`, body)
	// The sort is of the harness's making, not of what is measured: let it
	// run in memory.
	sql = fmt.Sprintf(`SET work_mem = '256MB';
WITH keys AS MATERIALIZED (
    SELECT 'evt_1' || left(translate(encode(sha256(g::text::bytea), 'base64'), '+/=', 'xyz'), 23) AS k,
           CASE WHEN g %% 4 = 0 THEN 'checkout.session.completed' ELSE 'invoice.created' END AS t
    FROM generate_series(1, %d) g
)`, events) + sql
	logf("bulk-loading %d rows into processed_events of database grown (bodies: %s)", b.o.rows, b.o.growBody)
	t0 := time.Now()
	if err := b.exec(ctx, "grown", sql); err != nil {
		return err
	}
	b.rep.grow.loadTime = time.Since(t0)
	t1 := time.Now()
	for _, st := range []struct{ db, sql string }{
		{"recv", `VACUUM ANALYZE`},
		{"grown", `VACUUM ANALYZE`},
		{"grown", `CHECKPOINT`},
	} {
		if err := b.exec(ctx, st.db, st.sql); err != nil {
			return err
		}
	}
	b.rep.grow.vacuumTime = time.Since(t1)
	conn, err := pgx.Connect(ctx, b.url("grown"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_ = conn.QueryRow(ctx, `SELECT pg_size_pretty(pg_relation_size('processed_events_pkey')),
       pg_size_pretty(pg_total_relation_size('processed_events')),
       (SELECT avg(octet_length(body)) FROM (SELECT body FROM processed_events TABLESAMPLE SYSTEM (1) WHERE kind = 'event') s)`).
		Scan(&b.rep.grow.pkSize, &b.rep.grow.tableSize, &b.rep.grow.bodyBytes)
	logf("loaded in %s, vacuumed and checkpointed in %s; primary key %s, table %s",
		b.rep.grow.loadTime.Round(time.Second), b.rep.grow.vacuumTime.Round(time.Second), b.rep.grow.pkSize, b.rep.grow.tableSize)
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// drainResult is one redriver drain.
type drainResult struct {
	steps            int
	api              apiStats
	done, parked     int
	started, settled time.Time // receiver started; every key seen and every row done
	err              error
}

// rate is steps per second from the first call to the last row done.
func (d drainResult) rate() float64 {
	if d.api.first.IsZero() || d.settled.IsZero() {
		return 0
	}
	return float64(d.steps) / d.settled.Sub(d.api.first).Seconds()
}

// phase6: the redriver drains a backlog of fulfillment steps, seeded
// directly in the database, against an API answering in 200 ms, with
// REDRIVE_PARALLELISM=N.
func (b *bench) phase6(ctx context.Context) error {
	n, steps := b.o.redriveParallelism, b.o.drainSteps
	ideal := float64(n) / stepsAPI.Seconds()
	logf("phase 6: the redriver drains %d fulfillment steps (API answering in %s), REDRIVE_PARALLELISM=%d (ideal %.0f/s); %d drains",
		steps, stepsAPI, n, ideal, b.o.drains)
	api, err := startFulfillmentAPI(stepsAPI)
	if err != nil {
		return err
	}
	defer api.close()
	timeout := max(60*time.Second, 10*time.Duration(float64(steps)/ideal*float64(time.Second)))
	for d := 1; d <= b.o.drains; d++ {
		tag := fmt.Sprintf("evt_drain%d_", d)
		if err := b.seedBacklog(ctx, tag, steps); err != nil {
			return err
		}
		api.reset()
		if d == b.o.drains {
			b.resetStatements(ctx, "drain")
		}
		r := drainResult{steps: steps, started: time.Now()}
		recv, err := b.startReceiver(ctx, fmt.Sprintf("receiver (drain %d)", d), "drain", map[string]string{
			"FULFILLMENT_URL":     api.url(),
			"REDRIVE_PARALLELISM": strconv.Itoa(n),
			"REDRIVE_INTERVAL":    "1s",
		})
		if err != nil {
			return err
		}
		r.err = b.waitDrained(ctx, api, tag, &r, timeout)
		recv.stop()
		r.api = api.stats()
		b.rep.drains = append(b.rep.drains, r)
		logf("  6  drain %d: %d steps, %d calls (%d keys, %d repeated), peak %d in flight, %d done, %d parked: %.1f steps/s",
			d, steps, r.api.calls, r.api.distinct, r.api.repeated, r.api.peak, r.done, r.parked, r.rate())
		if r.err != nil {
			return r.err
		}
	}
	b.keepStatements(ctx, "6 receiver: redriver drain (database drain)", "drain")
	return nil
}

// seedBacklog inserts steps fulfillment steps waiting for the redriver:
// each of its own paid order and finished checkout event (keys tag + n).
func (b *bench) seedBacklog(ctx context.Context, tag string, steps int) error {
	return b.exec(ctx, "drain", fmt.Sprintf(`
WITH o AS (
    INSERT INTO orders (source, provider_event_id, external_id, status, amount_cents, currency, customer_email)
    SELECT 'stripe', %[1]s || lpad(g::text, 6, '0'), 'cs_' || %[1]s || lpad(g::text, 6, '0'), 'paid', 100, 'usd', 'a@b.c'
    FROM generate_series(1, %[2]d) g
    RETURNING id, provider_event_id, external_id
), ev AS (
    INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type, api_version,
                                  body, outcome, via)
    SELECT provider_event_id, 'stripe', 'done', 'event', now(), provider_event_id, 'checkout.session.completed',
           '2023-10-16', convert_to('{"id":"' || provider_event_id || '"}', 'UTF8'), 'processed', 'delivery'
    FROM o
)
INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, step_kind, payload,
                              claim_token, attempts, claimed_at)
SELECT provider_event_id || '/fulfillment', 'stripe', 'in_progress', 'step', provider_event_id, 'fulfillment', 'fulfillment',
       jsonb_build_object('order', jsonb_build_object('id', id, 'source', 'stripe', 'external_id', external_id,
                          'amount_cents', 100, 'currency', 'usd', 'customer_email', 'a@b.c')),
       1, 1, '-infinity'
FROM o`, quoteLiteral(tag), steps))
}

// waitDrained polls until the API has seen every step's key and every step
// row is done, or timeout.
func (b *bench) waitDrained(ctx context.Context, api *fulfillmentAPI, tag string, r *drainResult, timeout time.Duration) error {
	conn, err := pgx.Connect(ctx, b.url("drain"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(timeout)
	for {
		err := conn.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'parked')
FROM processed_events WHERE kind = 'step' AND parent_key LIKE $1 || '%'`, tag).Scan(&r.done, &r.parked)
		if err != nil {
			return err
		}
		if st := api.stats(); st.distinct >= int64(r.steps) && r.done >= r.steps {
			r.settled, r.api = time.Now(), st
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain not finished after %s: %d of %d rows done, %d parked, %d keys called", timeout, r.done, r.steps, r.parked, api.stats().distinct)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// --- database helpers ---

func (b *bench) exec(ctx context.Context, dbname, sql string) error {
	conn, err := pgx.Connect(ctx, b.url(dbname))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err = conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", firstLine(sql), err)
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// countRows returns processed_events' row count in dbname (0 on error).
func (b *bench) countRows(ctx context.Context, dbname string) int64 {
	var n int64
	conn, err := pgx.Connect(ctx, b.url(dbname))
	if err != nil {
		return 0
	}
	defer conn.Close(context.Background())
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM processed_events`).Scan(&n)
	return n
}

func (b *bench) resetStatements(ctx context.Context, dbnames ...string) {
	if !b.rep.statements {
		return
	}
	for _, db := range dbnames {
		_ = b.exec(ctx, db, `SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`)
	}
}

// keepStatements records the statements that took the most database time
// in dbname since its last reset.
func (b *bench) keepStatements(ctx context.Context, title, dbname string) {
	if !b.rep.statements {
		return
	}
	ctx = context.WithoutCancel(ctx)
	conn, err := pgx.Connect(ctx, b.url(dbname))
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
SELECT calls, round(total_exec_time::numeric, 0), round(mean_exec_time::numeric, 3),
       shared_blks_hit, shared_blks_read, wal_bytes, regexp_replace(query, '\s+', ' ', 'g')
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%'
ORDER BY total_exec_time DESC LIMIT 10`)
	if err != nil {
		return
	}
	defer rows.Close()
	var sb strings.Builder
	sb.WriteString("| calls | total ms | mean ms | blks hit | blks read | WAL bytes | statement |\n|---:|---:|---:|---:|---:|---:|---|\n")
	for rows.Next() {
		var calls, hit, read int64
		var total, mean, wal float64
		var q string
		if err := rows.Scan(&calls, &total, &mean, &hit, &read, &wal, &q); err != nil {
			return
		}
		if len(q) > 120 {
			q = q[:120] + "…"
		}
		fmt.Fprintf(&sb, "| %d | %.0f | %.3f | %d | %d | %.0f | `%s` |\n", calls, total, mean, hit, read, wal, strings.ReplaceAll(q, "|", "\\|"))
	}
	b.rep.stmts = append(b.rep.stmts, stmtBlock{title, sb.String()})
}

type stmtBlock struct{ title, table string }

// startBase starts the baseline build (-base-server) as the receiver is
// started, on dbname, which it migrates itself at start-up (its migrations
// may be older than this build's); with -base-drop-indexes, dbname then
// drops those indexes.
func (b *bench) startBase(ctx context.Context, name, dbname string, env map[string]string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(b.o.baseServer)
	cmd.Env = b.receiverEnv(dbname, addr, env)
	s, err := b.startServer(ctx, name, addr, cmd)
	if err != nil {
		return nil, err
	}
	// Up means migrated: the indexes exist and no delivery has come yet.
	if err := b.ablate(ctx, dbname); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// ablate drops -base-drop-indexes from the baseline's database dbname,
// once: phase 2's baseline starts again on phase 1's database.
func (b *bench) ablate(ctx context.Context, dbname string) error {
	if len(b.o.baseDropIndexes) == 0 || b.ablated[dbname] {
		return nil
	}
	if err := b.dropIndexes(ctx, dbname, b.o.baseDropIndexes); err != nil {
		return err
	}
	if b.ablated == nil {
		b.ablated = map[string]bool{}
	}
	b.ablated[dbname] = true
	return nil
}

// dropIndexes drops the indexes names from database dbname (an index
// that is not there fails the run: a name mistyped measures nothing).
func (b *bench) dropIndexes(ctx context.Context, dbname string, names []string) error {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = pgx.Identifier{n}.Sanitize()
	}
	return b.exec(ctx, dbname, "DROP INDEX "+strings.Join(quoted, ", "))
}
