#!/usr/bin/env bash
# Runs every test (unit, database, end-to-end) against one private PostgreSQL
# cluster started for the run, unless TEST_DATABASE_URL names a server, then
# the core's again through PgBouncer in transaction mode.
# Prints each test's result and closes with "N passed, N failed, N skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
# The toolchain go.mod names; a machine starts on its own Go otherwise.
export GOTOOLCHAIN=go1.27.3
# A developer's OpenTelemetry settings would turn tracing on in tests that
# expect it off (the tracing tests install their own recorder).
unset $(env | sed -n 's/^\(OTEL_[A-Z0-9_]*\)=.*/\1/p')
mkdir -p var
log=var/test.log

# Every package; then the core's tests and one provider's conformance suite
# again, through a transaction-mode PgBouncer that each test binary starts
# (pgtest's TEST_DATABASE_POOLER), as a receiver with DATABASE_POOLER=transaction
# runs. (TestStatementsPlannedOnce counts server-side prepared statements,
# of which there are none through the pooler.)
all=(go test -count=1 -timeout 30m -v ./...)
pooled='echo "=== through PgBouncer in transaction mode (TEST_DATABASE_POOLER=transaction)" &&
  TEST_DATABASE_POOLER=transaction go test -count=1 -timeout 15m -v -skip "^TestStatementsPlannedOnce$" ./internal/webhooks/ &&
  TEST_DATABASE_POOLER=transaction go test -count=1 -timeout 15m -v \
    -run "^(TestConformance|TestCrashBetweenClaimAndCommit|TestRefundRacingOrder)$" ./internal/providers/stripe/'
if [ -z "${TEST_DATABASE_URL:-}" ]; then
  all=(bin/dev -temp -- "${all[@]}")
  pooled="bin/dev -temp -- bash -c '$pooled'"
fi

set +e
{ "${all[@]}"; a=$?; bash -c "$pooled"; p=$?; exit $(( a != 0 ? a : p )); } 2>&1 | tee "$log" |
  grep -E '^(=== RUN|=== through|\s*--- (PASS|FAIL|SKIP)|(ok|FAIL|PASS)\b|panic:|\s+\S+_test\.go:[0-9]+:)' | grep -v '^=== RUN'
rc=${PIPESTATUS[0]}
set -e

passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
echo
echo "full log: $log"
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "go test exited $rc without a failed test: see $log" >&2
fi
exit "$rc"
