#!/usr/bin/env bash
# Prints the packages a test target runs, one per line:
#
#   scripts/packages.sh check   unit and database tests: every package but
#                               the end-to-end suite (e2e, the built binary
#                               and a real browser), the benchmark tools
#                               (bench/) and the private-cluster machinery
#                               (internal/pglocal, internal/pgbouncer), whose
#                               tests start PostgreSQL servers of their own
#   scripts/packages.sh race    the core, under the race detector: the
#                               claim, lease and processor (internal/webhooks)
#                               and every provider (internal/providers/...)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.27.3
case "${1:-}" in
  check)
    go list ./... | grep -v -E '/(e2e|bench/.*|internal/pglocal|internal/pgbouncer)$'
    ;;
  race)
    go list ./internal/webhooks/... ./internal/providers/...
    ;;
  *)
    echo "usage: scripts/packages.sh check|race" >&2
    exit 2
    ;;
esac
