// Command benchrun measures the receiver against the copied dedupe snippet,
// in its two forms (bench/snippet-nethttp: plain net/http and pgx, the form
// most often copied and the headline baseline; bench/snippet: the same on
// Echo, the receiver's HTTP stack), and against pgbench running the same
// SQL, on a fresh private PostgreSQL cluster with PostgreSQL's default
// durability, and writes the ratios to BENCHMARKS.md. scripts/bench.sh
// (make bench) builds the binaries and runs it; run `benchrun -h` for the
// flags.
//
// Every comparison alternates short slots of its sides, round after round
// (the order rotates each round), and takes each ratio per round; one side
// runs twice per round (A and A′), and that A/A ratio is printed beside
// every target so that the noise of the shared machine is visible. The
// snippets write their own tables (bench/snippetdb: what a user who copies
// them creates); the net/http snippet also runs on a database migrated
// like the receiver's, a second row. Phases:
//
//	1  new invoice.created events: the receiver, both snippets (and the
//	   net/http one on the receiver's schema), and pgbench at the same
//	   concurrency running (c1) the snippet's SQL in one transaction on the
//	   snippet's tables (and at one client beside it), (a) the receiver's
//	   own pipelined transaction, 5 KB body included (the ceiling P), (b)
//	   the minimal one-statement transaction, (c) the snippet's two
//	   autocommit statements
//	2  replays of finished events: the receiver against both snippets
//	8  a customer's burst: the seven events of each Checkout of a
//	   subscription (loadgen -event burst), the receiver with a customer of
//	   its own per checkout, with every checkout one customer's (twice, the
//	   A/A control), with a handful of customers', and the net/http snippet
//	   sent the same events
//	7  new events through a PgBouncer in transaction mode: the receiver
//	   against the net/http snippet, both through the same pooler
//	3  checkout.session.completed (paid) with a 200 ms fulfillment API,
//	   64 concurrent deliveries, DB_MAX_CONNS=8
//	5  peak memory at 256 deliveries in flight, then the p99 latency at a
//	   fixed rate of half the peak
//	6  the redriver draining a backlog of fulfillment steps seeded in the
//	   database, with REDRIVE_PARALLELISM=N
//	4  -rows rows bulk-loaded into processed_events of a database of its
//	   own, then the receiver on it against the receiver on the small table
//
// The CPU of every slot is counted for the benchmark's own processes only:
// loadgen or pgbench, the receiver or the snippet, the processes of the
// benchmark's own cluster and its PgBouncer; the WAL of every slot is the
// cluster's insert position moved over it; the lock waits of every slot are
// pg_stat_activity sampled every -lock-sample: how many of the active
// backends were waiting for a lock (another transaction's row, a relation's
// extension), and for which.
//
// After the rounds of phases 1 and 2, a cost window per server (-cost) runs
// the profiling builds (bench/cmd/profserver, the snippets with -pprof)
// through a proxy that counts round trips to PostgreSQL, and takes CPU and
// allocation profiles (written to -profiles) and the allocations per
// delivery, and, with the cluster otherwise idle before and after, the WAL
// flushes per commit (pg_stat_wal's wal_sync against the database's
// commits: what group commit does at that concurrency); pgbench's (a) and
// (c1) get such a window too. The report's "Cost per new event" table puts
// these beside the rounds' CPU and WAL per event.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/bench/snippetdb"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pglocal"
)

const (
	stripeSecret = "whsec_benchrun_0123456789abcdef0123456789abcdef"
	mib          = 1 << 20
)

type options struct {
	server, loadgen, snippet string
	snippetNet, profserver   string
	baseServer               string   // the baseline receiver of phases 1, 2, 7 and 8; "" for none
	baseDropIndexes          []string // indexes the baseline's databases drop once migrated: an ablation
	out                      string
	command                  string
	phases                   map[int]bool
	quick                    bool

	rounds                   int
	slot, slotWarmup, warmup time.Duration
	window                   time.Duration
	concurrency              int
	rows                     int
	growBody                 string
	drainSteps, drains       int
	redriveParallelism       int
	keep, perf               bool
	cost                     bool
	lockSample               time.Duration
	costTime                 time.Duration
	profiles                 string
}

// quickDefaults are -quick's values for the flags not set explicitly.
var quickDefaults = map[string]string{
	"rounds": "3", "slot": "1s", "slot-warmup": "300ms", "warmup": "1s", "window": "3s",
	"rows": "200000", "drain-steps": "200", "drains": "1", "cost-time": "2s",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			return
		}
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(2)
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: benchrun [flags]   (normally through scripts/bench.sh or make bench)

Measures the receiver against the copied snippet (net/http and Echo) and pgbench
on a fresh durable PostgreSQL cluster and writes the report (-out). Phases: 1 new
events, 2 replays, 3 steps with a 200 ms API, 4 growth to -rows rows, 5 memory and
p99, 6 redriver drain, 7 new events through PgBouncer (transaction mode), 8 a
customer's burst (one customer's checkouts against a customer per checkout). The
default run takes about 25 minutes; -quick about 5.

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.server, "server", "bin/server", "receiver `binary`")
	fs.StringVar(&o.loadgen, "loadgen", "bin/loadgen", "loadgen `binary`")
	fs.StringVar(&o.snippet, "snippet", "bin/snippet", "the Echo snippet's `binary` (bench/snippet)")
	fs.StringVar(&o.snippetNet, "snippet-nethttp", "bin/snippet-nethttp", "the net/http snippet's `binary` (bench/snippet-nethttp), the headline baseline")
	fs.StringVar(&o.profserver, "profserver", "bin/profserver", "the receiver with pprof (bench/cmd/profserver), for the cost windows")
	fs.StringVar(&o.baseServer, "base-server", "", "a baseline build of the receiver (`binary`) that phases 1, 2, 7 and 8 also run, on databases of its own that it migrates, in the same rounds: a before/after of a change")
	dropIndexes := fs.String("base-drop-indexes", "", "indexes (`names`, comma-separated) that the baseline's databases drop once its server has migrated them: an ablation, what the build of -base-server costs without them (needs -base-server)")
	fs.StringVar(&o.out, "out", "BENCHMARKS.md", "report `file`")
	fs.StringVar(&o.command, "command", "", "the command line the report says it was run with (default: $BENCH_COMMAND, set by scripts/bench.sh, else benchrun's own)")
	phases := fs.String("phases", "1,2,3,4,5,6,7,8", "phases to run, comma-separated")
	fs.BoolVar(&o.quick, "quick", false, "a smoke run: defaults "+quickText()+" (flags given explicitly win)")
	fs.IntVar(&o.rounds, "rounds", 16, "rounds of phases 1, 2, 4, 7 and 8 (each round: one slot per side; phases 3 and 5 run half as many)")
	fs.DurationVar(&o.slot, "slot", 2*time.Second, "measured time of one slot (pgbench: whole seconds)")
	fs.DurationVar(&o.slotWarmup, "slot-warmup", 500*time.Millisecond, "loadgen's warm-up before each slot, not measured")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up of each server before a phase's rounds")
	fs.DurationVar(&o.window, "window", 10*time.Second, "phase 5: the window at 256 in flight, and pgbench's run at the fixed rate")
	fs.IntVar(&o.concurrency, "concurrency", 16, "concurrency of phases 1, 2, 4, 7 and 8: loadgen's workers, pgbench's clients, the pools (DB_MAX_CONNS)")
	fs.IntVar(&o.rows, "rows", 5_000_000, "phase 4: rows bulk-loaded into processed_events")
	fs.StringVar(&o.growBody, "grow-body", "small", "phase 4: bodies of the bulk-loaded events: small (compact JSON) or full (real-size invoice bodies: much slower, many GB)")
	fs.IntVar(&o.drainSteps, "drain-steps", 1000, "phase 6: fulfillment steps in each backlog")
	fs.IntVar(&o.drains, "drains", 2, "phase 6: drains (two give an A/A control)")
	fs.IntVar(&o.redriveParallelism, "redrive-parallelism", 8, "phase 6: REDRIVE_PARALLELISM given to the receiver (N); the target is 0.8 × N / 0.2 s")
	fs.BoolVar(&o.keep, "keep", false, "keep the data directory and logs")
	fs.BoolVar(&o.perf, "perf", false, "record a perf CPU profile of the receiver over phase 1 (needs perf)")
	fs.BoolVar(&o.cost, "cost", true, "after phases 1 and 2: a cost window per server (round trips, allocations, CPU and allocation profiles)")
	fs.DurationVar(&o.costTime, "cost-time", 6*time.Second, "measured time of each cost window (its profiles cover it)")
	fs.StringVar(&o.profiles, "profiles", "var/bench-profiles", "`directory` for the cost windows' pprof profiles (go tool pprof FILE)")
	fs.DurationVar(&o.lockSample, "lock-sample", 10*time.Millisecond, "how often pg_stat_activity is sampled in each measured slot for backends waiting for a lock (0: not sampled)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickDefaults {
			if !set[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	o.phases = map[int]bool{}
	for _, f := range strings.Split(*phases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 8 {
			return o, fmt.Errorf("-phases: %q is not a phase (1 to 8)", f)
		}
		o.phases[n] = true
	}
	if *dropIndexes != "" {
		if o.baseServer == "" {
			return o, fmt.Errorf("-base-drop-indexes needs -base-server: it names what the baseline's databases drop")
		}
		for _, name := range strings.Split(*dropIndexes, ",") {
			name = strings.TrimSpace(name)
			if !indexName.MatchString(name) {
				return o, fmt.Errorf("-base-drop-indexes: %q is not an index name (lower-case letters, digits and _)", name)
			}
			o.baseDropIndexes = append(o.baseDropIndexes, name)
		}
	}
	switch {
	case o.rounds < 1 || o.drains < 1 || o.drainSteps < 1 || o.concurrency < 1 || o.redriveParallelism < 1:
		return o, fmt.Errorf("-rounds, -drains, -drain-steps, -concurrency and -redrive-parallelism must be at least 1")
	case o.slot < time.Second:
		return o, fmt.Errorf("-slot must be at least 1s (pgbench runs whole seconds)")
	case o.costTime < time.Second:
		return o, fmt.Errorf("-cost-time must be at least 1s (pprof profiles whole seconds)")
	case o.growBody != "small" && o.growBody != "full":
		return o, fmt.Errorf("-grow-body must be small or full")
	case o.rows < 3:
		return o, fmt.Errorf("-rows must be at least 3")
	}
	if o.command == "" {
		o.command = os.Getenv("BENCH_COMMAND")
	}
	if o.command == "" {
		o.command = strings.Join(append([]string{"benchrun"}, args...), " ")
	}
	return o, nil
}

// indexName is an index name -base-drop-indexes accepts: the receiver's
// migrations name every index so.
var indexName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func quickText() string {
	var parts []string
	for _, k := range sortedKeys(quickDefaults) {
		parts = append(parts, "-"+k+" "+quickDefaults[k])
	}
	return strings.Join(parts, " ")
}

// bench holds what every phase needs.
type bench struct {
	o           options
	cluster     *pglocal.Cluster
	tmp         string
	pgbenchBin  string
	cpu         cpuMeter
	wal         *walMeter
	locks       *lockSampler // nil: not sampled
	invoiceBody string       // what pgbench's (a) and (b) store
	rep         *report
	urls        map[string]string // tests: databases by name, instead of the cluster's
	ablated     map[string]bool   // the baseline's databases that dropped -base-drop-indexes
}

// url is the connection URL of database dbname.
func (b *bench) url(dbname string) string {
	if u, ok := b.urls[dbname]; ok {
		return u
	}
	return b.cluster.URL(dbname)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchrun %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	bins := []string{o.server, o.loadgen, o.snippet, o.snippetNet}
	if o.baseServer != "" {
		bins = append(bins, o.baseServer)
	}
	if o.cost {
		bins = append(bins, o.profserver)
	}
	for _, p := range bins {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %w (scripts/bench.sh builds it)", p, err)
		}
	}
	bin, err := pglocal.FindBinDir()
	if err != nil {
		return err
	}
	b := &bench{o: o, rep: newReport(o)}
	if b.pgbenchBin, err = findPgbench(bin); err != nil {
		return err
	}
	if b.invoiceBody, err = b.printBody(ctx, "invoice"); err != nil {
		return err
	}
	b.rep.pgbenchBody = len(b.invoiceBody)
	b.tmp, err = os.MkdirTemp("", "benchrun")
	if err != nil {
		return err
	}
	if o.keep {
		logf("keeping %s", b.tmp)
	} else {
		defer os.RemoveAll(b.tmp)
	}
	pglog, err := os.Create(filepath.Join(b.tmp, "postgres.log"))
	if err != nil {
		return err
	}
	defer pglog.Close()

	start := time.Now()
	logf("starting a durable PostgreSQL cluster in %s", b.tmp)
	// The data directory is a temporary directory of its own, which the
	// server can reach when it runs as postgres (we are root): b.tmp is
	// private, and pglocal changes no parent's permissions.
	pgdir, err := os.MkdirTemp("", "benchrun-pg")
	if err != nil {
		return err
	}
	if o.keep {
		logf("keeping %s", pgdir)
	} else {
		defer os.RemoveAll(pgdir)
	}
	b.cluster, err = pglocal.Start(ctx, pglocal.Options{Dir: pgdir, Durable: true, Log: pglog})
	if err != nil {
		return err
	}
	defer b.cluster.Stop(context.Background())
	b.cpu = cpuMeter{proc: "/proc", dataDir: b.cluster.Dir()}
	if err := b.setup(ctx); err != nil {
		return err
	}
	if b.wal, err = openWALMeter(ctx, b.cluster.URL("postgres")); err != nil {
		return err
	}
	defer b.wal.close()
	if b.locks, err = openLockSampler(ctx, b.cluster.URL("postgres"), o.lockSample); err != nil {
		return err
	}
	defer b.locks.close()

	// Phase 5 takes half of phase 1's peak; phase 4's bulk load comes last,
	// so that its gigabytes do not sit in the cache of the other phases.
	for _, ph := range []struct {
		n int
		f func(context.Context) error
	}{{1, b.phase1}, {2, b.phase2}, {8, b.phase8}, {7, b.phase7}, {3, b.phase3}, {5, b.phase5}, {6, b.phase6}, {4, b.phase4}} {
		if !o.phases[ph.n] {
			continue
		}
		b.rep.ran[ph.n] = true
		t0 := time.Now()
		err := ph.f(ctx)
		b.rep.phaseTime[ph.n] = time.Since(t0)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			logf("phase %d failed: %v", ph.n, err)
			b.rep.failed[ph.n] = err
		}
	}
	b.rep.total = time.Since(start)
	text := b.rep.render() + keptTail(o.out)
	fmt.Print("\n" + b.rep.ratioTable())
	if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
		return err
	}
	logf("wrote %s in %s", o.out, b.rep.total.Round(time.Second))
	if len(b.rep.failed) > 0 {
		var ns []string
		for _, n := range slices.Sorted(mapKeys(b.rep.failed)) {
			ns = append(ns, strconv.Itoa(n))
		}
		return fmt.Errorf("phase %s did not finish (see %s)", strings.Join(ns, ", "), o.out)
	}
	return nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// setup enables pg_stat_statements when it is installed, creates and
// migrates one database per use, and records the versions.
func (b *bench) setup(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.cluster.URL("postgres"))
	if err != nil {
		return err
	}
	_ = conn.QueryRow(ctx, `SELECT version()`).Scan(&b.rep.pgVersion)
	var avail bool
	_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_stat_statements')`).Scan(&avail)
	if avail {
		if _, err := conn.Exec(ctx, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`); err != nil {
			return err
		}
		_, _ = conn.Exec(ctx, `ALTER SYSTEM SET pg_stat_statements.track = 'all'`)
	}
	conn.Close(ctx)
	if avail {
		if err := b.cluster.Restart(ctx); err != nil {
			return err
		}
		b.rep.statements = true
	}
	// recv: the receiver in phases 1, 2 and 4 (the small table); nsnip,
	// snip: the net/http and Echo snippets, on their own tables; nsnipr:
	// the net/http snippet on the receiver's; pgb: pgbench's scripts of the
	// receiver's SQL, pgbsnip: of the snippet's, on its tables; steps, mem,
	// drain: phases 3, 5, 6; grown: phase 4's bulk load; precv, psnip: the
	// receiver and the net/http snippet through PgBouncer (phase 7);
	// burst, bsnip: the receiver and the net/http snippet in phase 8,
	// brecv, bprecv, bburst: the baseline receiver (-base-server) of phases
	// 1 and 2 (brecv), 7 and 8, which migrates them.
	for _, d := range []struct {
		name string
		as   string // "receiver": migrated; "snippet": the snippet's tables; "": empty, the snippet makes its tables
	}{
		{"recv", "receiver"}, {"nsnip", ""}, {"snip", ""}, {"nsnipr", "receiver"}, {"pgb", "receiver"},
		{"pgbsnip", "snippet"}, {"steps", "receiver"}, {"mem", "receiver"}, {"drain", "receiver"},
		{"grown", "receiver"}, {"precv", "receiver"}, {"psnip", ""}, {"burst", "receiver"}, {"bsnip", ""}, {"bburst", ""}, {"brecv", ""}, {"bprecv", ""},
	} {
		name := d.name
		if err := b.cluster.CreateDatabase(ctx, name); err != nil {
			return err
		}
		switch d.as {
		case "receiver":
			if err := db.Migrate(b.url(name)); err != nil {
				return fmt.Errorf("migrate %s: %w", name, err)
			}
		case "snippet":
			if err := b.exec(ctx, name, snippetdb.Schema); err != nil {
				return err
			}
		}
		if avail {
			if err := b.exec(ctx, name, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
				return err
			}
		}
	}
	return nil
}

// keptMarker starts the part of the report written by hand: benchrun keeps
// everything from it to the end of the existing report, and
// scripts/bench.sh puts the micro-benchmarks before it.
const keptMarker = "<!-- benchrun keeps everything below this line: it is written by hand -->"

// keptTail is the hand-written part of the existing report at path, from
// keptMarker on, or "" when there is none.
func keptTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	i := strings.Index(string(b), keptMarker)
	if i < 0 {
		return ""
	}
	return "\n" + string(b[i:])
}
