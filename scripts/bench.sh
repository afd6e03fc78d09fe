#!/usr/bin/env bash
# Measures the receiver against the copied dedupe snippet (on net/http, the
# headline baseline, and on Echo) and against pgbench running the same SQL,
# on a fresh durable PostgreSQL cluster, directly and through PgBouncer, and
# writes BENCHMARKS.md (about 20 minutes), keeping its hand-written part.
# Arguments go to bench/cmd/benchrun: -quick for a smoke run of a few
# minutes, -phases 1,2 -rounds 4 to run some phases only, -h for every flag.
# The cost windows' pprof profiles go to var/bench-profiles. `make bench`
# runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
# The toolchain go.mod names; a machine starts on its own Go otherwise.
export GOTOOLCHAIN=go1.27.3
GO=${GO:-go}

if ! command -v pgbench >/dev/null && ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1; then
	echo "bench: pgbench not found; install the PostgreSQL client (apt-get install postgresql-client)" >&2
	exit 1
fi

# Phase 7 runs PgBouncer; without it that phase alone fails.
scripts/ensure-pgbouncer.sh || echo "bench: PgBouncer missing: phase 7 will fail" >&2

# BENCH_BIN: where the binaries go (default bin, as make build's).
bin=${BENCH_BIN:-bin}
mkdir -p "$bin"
$GO build -o "$bin/server" ./cmd/server
$GO build -o "$bin/loadgen" ./cmd/loadgen
$GO build -o "$bin/snippet" ./bench/snippet
$GO build -o "$bin/snippet-nethttp" ./bench/snippet-nethttp
$GO build -o "$bin/profserver" ./bench/cmd/profserver
$GO build -o "$bin/benchrun" ./bench/cmd/benchrun

# The report records the command it was run with.
if [ $# -eq 0 ] && [ -n "${MAKELEVEL:-}" ]; then
	export BENCH_COMMAND="make bench"
else
	export BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
fi

out=
quick=false
prev=
for a in "$@"; do
	case "$a" in
	-h | -help | --help) exec "$bin/benchrun" -h ;;
	-quick | --quick | -quick=true | --quick=true) quick=true ;;
	-out=* | --out=*) out=${a#*=} ;;
	esac
	case "$prev" in -out | --out) out=$a ;; esac
	prev=$a
done
args=(-server "$bin/server" -loadgen "$bin/loadgen" -snippet "$bin/snippet" -snippet-nethttp "$bin/snippet-nethttp"
	-profserver "$bin/profserver")
if [ -z "$out" ]; then
	out=BENCHMARKS.md
	args+=(-out "$out")
fi

rc=0
"$bin/benchrun" "${args[@]}" "$@" || rc=$?
[ -f "$out" ] || exit "$rc"

# Micro-benchmarks: signature verification and event decoding (not in a
# -quick run).
if [ "$quick" = false ]; then
	pkgs=()
	for p in internal/providers/stripe internal/providers/github; do
		ls "$p"/*_bench_test.go >/dev/null 2>&1 && pkgs+=("./$p")
	done
	if [ ${#pkgs[@]} -gt 0 ]; then
		micro=$($GO test -run '^$' -bench . -benchmem -benchtime 1s "${pkgs[@]}" 2>&1 | grep -E '^(Benchmark|goos|goarch|cpu|pkg)' || true)
		section=$(
			echo "## Micro-benchmarks"
			echo
			echo "\`go test -run '^\$' -bench . -benchmem ${pkgs[*]}\` (same machine, same noise):"
			echo
			echo '```'
			echo "$micro"
			echo '```'
			echo
		)
		# Before the hand-written part, which benchrun keeps at the end.
		marker='<!-- benchrun keeps everything below this line: it is written by hand -->'
		if grep -qF "$marker" "$out"; then
			tmp=$(mktemp)
			SECTION=$section MARKER=$marker awk 'index($0, ENVIRON["MARKER"]) == 1 && !done { print ENVIRON["SECTION"]; print ""; done = 1 } { print }' "$out" >"$tmp"
			cat "$tmp" >"$out"
			rm -f "$tmp"
		else
			echo "$section" >>"$out"
		fi
		echo "$micro"
	fi
fi
echo "bench: wrote $out"
exit "$rc"
