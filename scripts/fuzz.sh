#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a bounded time each
# (FUZZTIME, default 20s). The seed corpora also run in `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The toolchain go.mod names; a machine starts on its own Go otherwise.
export GOTOOLCHAIN=go1.27.3
fuzztime=${FUZZTIME:-20s}
status=0
while IFS=: read -r file _ line; do
  pkg=$(dirname "$file")
  name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$line")
  echo "== $pkg $name ($fuzztime)"
  go test -run "^$" -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1x "$pkg" || status=1
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | sort)
exit $status
