#!/usr/bin/env bash
# Runs tests against one private PostgreSQL cluster started for the run,
# unless TEST_DATABASE_URL names a server. Prints each test's result and
# closes with "N passed, N failed, N skipped".
#
#   scripts/test.sh                       every package
#   RACE=core POOLER=1 scripts/test.sh    make test: every package, the core
#                                         (scripts/packages.sh race) under
#                                         the race detector; then the core's
#                                         tests again through PgBouncer
#   scripts/test.sh -short PKG...         what make check runs
#   scripts/test.sh -race PKG...          what make race runs
#
# Arguments are handed to go test: flags first, then packages (./... when
# none is named). LOG names the full log (default var/test.log).
set -euo pipefail
cd "$(dirname "$0")/.."
# The toolchain go.mod names; a machine starts on its own Go otherwise.
export GOTOOLCHAIN=go1.27.3
# A developer's OpenTelemetry settings would turn tracing on in tests that
# expect it off (the tracing tests install their own recorder).
unset $(env | sed -n 's/^\(OTEL_[A-Z0-9_]*\)=.*/\1/p')

# One cluster for the whole run: this script again, under bin/dev.
if [ -z "${TEST_DATABASE_URL:-}" ]; then
  exec bin/dev -temp -- "$0" "$@"
fi

mkdir -p var
log=${LOG:-var/test.log}
: > "$log"

flags=() pkgs=()
for a in "$@"; do
  case $a in -*) flags+=("$a") ;; *) pkgs+=("$a") ;; esac
done
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

# run go test with its arguments, appending to the log and printing each
# test's result; returns go test's status.
run() {
  set +e
  go test -count=1 -timeout 30m -v "$@" 2>&1 | tee -a "$log" |
    grep -E '^(=== RUN|\s*--- (PASS|FAIL|SKIP)|(ok|FAIL|PASS)\b|panic:|WARNING: DATA RACE|pgtest: goroutines|found unexpected goroutines|\s+\S+_test\.go:[0-9]+:)' | grep -v '^=== RUN'
  local rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}

rc=0
if [ "${RACE:-}" = core ]; then
  mapfile -t race < <(scripts/packages.sh race)
  mapfile -t rest < <(go list "${pkgs[@]}" | grep -vxF -f <(printf '%s\n' "${race[@]}"))
  run "${flags[@]}" "${rest[@]}" || rc=$?
  echo "the core under the race detector:"
  run -race "${flags[@]}" "${race[@]}" || rc=$?
else
  run "${flags[@]}" "${pkgs[@]}" || rc=$?
fi

# Then the core's tests and one provider's conformance suite again, through
# a transaction-mode PgBouncer that each test binary starts (pgtest's
# TEST_DATABASE_POOLER), as a receiver with DATABASE_POOLER=transaction
# runs. (TestStatementsPlannedOnce counts server-side prepared statements,
# of which there are none through the pooler.)
if [ "${POOLER:-}" = 1 ]; then
  echo "=== through PgBouncer in transaction mode (TEST_DATABASE_POOLER=transaction)"
  (
    export TEST_DATABASE_POOLER=transaction
    st=0
    run -skip '^TestStatementsPlannedOnce$' ./internal/webhooks/ || st=$?
    run -run '^(TestConformance|TestCrashBetweenClaimAndCommit|TestRefundRacingOrder)$' ./internal/providers/stripe/ || st=$?
    exit "$st"
  ) || rc=$?
fi

passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
echo
echo "full log: $log"
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "go test exited $rc without a failed test: see $log (a data race or a goroutine left running fails a package after its tests)" >&2
fi
exit "$rc"
