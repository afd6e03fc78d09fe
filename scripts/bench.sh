#!/usr/bin/env bash
# Measures the receiver against pgbench running its own SQL and against the
# copied dedupe snippet, on a fresh durable PostgreSQL cluster, and writes
# BENCHMARKS.md. Extra arguments go to bench/cmd/benchrun (-phase, -warmup,
# -concurrency, -rows, -perf, -keep). `make bench` builds bin/server first.
set -euo pipefail
cd "$(dirname "$0")/.."
# The toolchain go.mod names; a machine starts on its own Go otherwise.
export GOTOOLCHAIN=go1.27.3
GO=${GO:-go}

if ! command -v pgbench >/dev/null && ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1; then
	echo "bench: pgbench not found; install the PostgreSQL client (apt-get install postgresql-client)" >&2
	exit 1
fi

mkdir -p bin
$GO build -o bin/server ./cmd/server
$GO build -o bin/loadgen ./cmd/loadgen
$GO build -o bin/snippet ./bench/snippet
$GO build -o bin/benchrun ./bench/cmd/benchrun

bin/benchrun -server bin/server -loadgen bin/loadgen -snippet bin/snippet -out BENCHMARKS.md "$@"

# Micro-benchmarks: signature verification and event decoding.
pkgs=(./internal/webhooks/stripehook)
[ -d internal/webhooks/githubhook ] && ls internal/webhooks/githubhook/*_bench_test.go >/dev/null 2>&1 &&
	pkgs+=(./internal/webhooks/githubhook)
micro=$($GO test -run '^$' -bench . -benchmem -benchtime 1s "${pkgs[@]}" 2>&1 | grep -E '^(Benchmark|goos|goarch|cpu|pkg)' || true)
{
	echo "## Micro-benchmarks"
	echo
	echo "\`go test -run '^\$' -bench . -benchmem ${pkgs[*]}\` (same machine, same noise):"
	echo
	echo '```'
	echo "$micro"
	echo '```'
} >>BENCHMARKS.md
echo "$micro"
echo "bench: wrote BENCHMARKS.md"
