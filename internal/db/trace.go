package db

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/telemetry"
)

// Tracer is the pgx tracer of the receiver's pools: otelpgx, for the
// statements, batches, prepares, connects and pool acquires that run
// inside a recording span (a delivery's, a step's), and nothing at all
// otherwise: no span of its own making is ever a root, a redriver's idle
// poll or a metrics scrape leaves no trace, and while tracing is off it
// costs an atomic load per call.
//
// Spans are named after what pgx does and the statement, "<operation>
// <table>" ("query UPDATE processed_events", "batch query INSERT orders",
// "prepare SELECT processed_events"); the statement's text is recorded
// (its values are all parameters), its parameters never: they carry
// customer data.
func Tracer() pgx.QueryTracer { return tracer }

var tracer = gate{otelpgx.NewTracer(
	otelpgx.WithTracerProvider(telemetry.Provider()),
	otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()), // the receiver's metrics are Prometheus's
	otelpgx.WithSpanNameCtxFunc(func(_ context.Context, sql string) string { return queryNames.name(sql) }),
	otelpgx.WithQuerySpanNamePrefix(), // "query …", "batch query …", "prepare …": a prepare is not an execution
	// The server's address, port, user and database on every statement's
	// span cost a sixth of a sampled delivery's tracing, and say what the
	// configuration says: one database per process.
	otelpgx.WithDisableConnectionDetailsInAttributes(),
)}

// gate hands a call to otelpgx only when it runs inside a recording span.
// A span's recording never changes while a call runs, and otelpgx's own
// span is a child of it, so each end goes where its start went.
type gate struct{ t *otelpgx.Tracer }

var (
	_ pgx.QueryTracer       = gate{}
	_ pgx.BatchTracer       = gate{}
	_ pgx.ConnectTracer     = gate{}
	_ pgx.PrepareTracer     = gate{}
	_ pgx.CopyFromTracer    = gate{}
	_ pgxpool.AcquireTracer = gate{}
)

// recording reports whether ctx's span records. While tracing is off no
// span records, and the answer is an atomic load, not a walk up ctx's
// chain (a delivery's is a dozen contexts deep, and pgx calls a tracer
// seven times for a new event's transaction).
func recording(ctx context.Context) bool {
	return telemetry.Enabled() && trace.SpanFromContext(ctx).IsRecording()
}

func (g gate) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !recording(ctx) {
		return ctx
	}
	return g.t.TraceQueryStart(ctx, c, d)
}

func (g gate) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	if recording(ctx) {
		g.t.TraceQueryEnd(ctx, c, d)
	}
}

func (g gate) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if !recording(ctx) {
		return ctx
	}
	return g.t.TraceBatchStart(ctx, c, d)
}

func (g gate) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if recording(ctx) {
		g.t.TraceBatchQuery(ctx, c, d)
	}
}

func (g gate) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	if recording(ctx) {
		g.t.TraceBatchEnd(ctx, c, d)
	}
}

func (g gate) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if !recording(ctx) {
		return ctx
	}
	return g.t.TraceConnectStart(ctx, d)
}

func (g gate) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if recording(ctx) {
		g.t.TraceConnectEnd(ctx, d)
	}
}

func (g gate) TracePrepareStart(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if !recording(ctx) {
		return ctx
	}
	return g.t.TracePrepareStart(ctx, c, d)
}

func (g gate) TracePrepareEnd(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareEndData) {
	if recording(ctx) {
		g.t.TracePrepareEnd(ctx, c, d)
	}
}

func (g gate) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if !recording(ctx) {
		return ctx
	}
	return g.t.TraceCopyFromStart(ctx, c, d)
}

func (g gate) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if recording(ctx) {
		g.t.TraceCopyFromEnd(ctx, c, d)
	}
}

func (g gate) TraceAcquireStart(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if !recording(ctx) {
		return ctx
	}
	return g.t.TraceAcquireStart(ctx, p, d)
}

func (g gate) TraceAcquireEnd(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if recording(ctx) {
		g.t.TraceAcquireEnd(ctx, p, d)
	}
}

// queryNames caches QueryName for the statements a process runs: a few
// dozen constants, named once each rather than on every span. Past its
// bound (a fork generating SQL), names are computed and not kept.
var queryNames = nameCache{max: 1024}

type nameCache struct {
	max   int
	n     atomic.Int64
	names sync.Map // sql → name
}

func (c *nameCache) name(sql string) string {
	if v, ok := c.names.Load(sql); ok {
		return v.(string)
	}
	name := QueryName(sql)
	if c.n.Add(1) <= int64(c.max) {
		c.names.Store(sql, name)
	}
	return name
}

// QueryName names a statement as the database span conventions do,
// "<operation> <table>": the first INSERT, UPDATE or DELETE it makes, even
// inside a WITH ("WITH claim AS (INSERT INTO processed_events …) SELECT …"
// is "INSERT processed_events"), or else, for a statement that only calls
// a function, "SELECT <function>" ("SELECT receiver_claim", whose INSERT
// runs in the database), or else its first word and the table it first
// reads ("SELECT processed_events"; "SELECT" for one that reads none, or
// reads a function first).
func QueryName(sql string) string {
	words := sqlWords(sql)
	first := ""
	if len(words) > 0 {
		first = strings.ToUpper(words[0])
	}
	for i, w := range words {
		switch strings.ToUpper(w) {
		case "INSERT", "DELETE":
			if i+2 < len(words) && isKeyword(words[i+1], "INTO", "FROM") {
				return strings.ToUpper(w) + " " + table(words[i+2])
			}
		case "UPDATE":
			if i+1 < len(words) && (i == 0 || words[i-1] == "(") {
				return "UPDATE " + table(words[i+1])
			}
		}
	}
	if fn := calledFunction(sql, words); fn != "" {
		return "SELECT " + fn
	}
	if first == "SELECT" || first == "WITH" {
		for i, w := range words {
			if isKeyword(w, "FROM") && i+1 < len(words) && words[i+1] != "(" {
				if i+2 < len(words) && words[i+2] == "(" {
					break // a function: no table
				}
				return "SELECT " + table(words[i+1])
			}
		}
		return "SELECT"
	}
	if first == "" {
		return "UNKNOWN"
	}
	return first
}

// callRe is the start of a statement that calls a function.
var callRe = regexp.MustCompile(`(?is)^\s*select\s+[a-z_][a-z0-9_.]*\s*\(`)

// calledFunction is the function a statement that only calls one calls
// ("SELECT receiver_claim($1, …)": the claim, which runs an INSERT in the
// database), or "".
func calledFunction(sql string, words []string) string {
	if len(words) < 4 || words[2] != "(" || words[len(words)-1] != ")" || !callRe.MatchString(sql) {
		return ""
	}
	depth := 0
	for i, w := range words[2:] {
		switch w {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 && i != len(words)-3 {
				return "" // more follows the call
			}
		}
	}
	return table(words[1])
}

// sqlWords splits a statement into words and parentheses, skipping
// comments and string literals.
func sqlWords(sql string) []string {
	var words []string
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case strings.HasPrefix(sql[i:], "--"):
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(sql)
			}
		case strings.HasPrefix(sql[i:], "/*"):
			if j := strings.Index(sql[i+2:], "*/"); j >= 0 {
				i += j + 4
			} else {
				i = len(sql)
			}
		case c == '\'':
			j := i + 1
			for j < len(sql) && sql[j] != '\'' {
				j++
			}
			i = j + 1
		case c == '(' || c == ')':
			words = append(words, sql[i:i+1])
			i++
		case c == '_' || c == '"' || c == '.' || c < 128 && (unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c))):
			j := i
			for j < len(sql) && (sql[j] == '_' || sql[j] == '"' || sql[j] == '.' ||
				sql[j] < 128 && (unicode.IsLetter(rune(sql[j])) || unicode.IsDigit(rune(sql[j])))) {
				j++
			}
			words = append(words, sql[i:j])
			i = j
		default:
			i++
		}
	}
	return words
}

func isKeyword(w string, kws ...string) bool {
	for _, k := range kws {
		if strings.EqualFold(w, k) {
			return true
		}
	}
	return false
}

// table is a table name without quotes or schema.
func table(w string) string {
	w = strings.ReplaceAll(w, `"`, "")
	if i := strings.LastIndexByte(w, '.'); i >= 0 {
		w = w[i+1:]
	}
	return w
}
