#!/usr/bin/env bash
# Measures the receiver against the copied dedupe snippet and against
# pgbench running the same SQL, on a fresh durable PostgreSQL cluster, and
# writes BENCHMARKS.md (about 12 minutes). Arguments go to
# bench/cmd/benchrun: -quick for a smoke run of a few minutes, -phases 1,4 to
# run some phases only, -h for every flag. `make bench` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
# The toolchain go.mod names; a machine starts on its own Go otherwise.
export GOTOOLCHAIN=go1.27.3
GO=${GO:-go}

if ! command -v pgbench >/dev/null && ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1; then
	echo "bench: pgbench not found; install the PostgreSQL client (apt-get install postgresql-client)" >&2
	exit 1
fi

# BENCH_BIN: where the binaries go (default bin, as make build's).
bin=${BENCH_BIN:-bin}
mkdir -p "$bin"
$GO build -o "$bin/server" ./cmd/server
$GO build -o "$bin/loadgen" ./cmd/loadgen
$GO build -o "$bin/snippet" ./bench/snippet
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
args=(-server "$bin/server" -loadgen "$bin/loadgen" -snippet "$bin/snippet")
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
		{
			echo "## Micro-benchmarks"
			echo
			echo "\`go test -run '^\$' -bench . -benchmem ${pkgs[*]}\` (same machine, same noise):"
			echo
			echo '```'
			echo "$micro"
			echo '```'
		} >>"$out"
		echo "$micro"
	fi
fi
echo "bench: wrote $out"
exit "$rc"
