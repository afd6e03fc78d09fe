#!/usr/bin/env bash
# Makes sure PgBouncer is on this machine, for `make test` (the tests that run
# the receiver behind a transaction-mode pooler: pgtest's TEST_DATABASE_POOLER,
# e2e/pooler_test.go, internal/pgbouncer) and the benchmark's pooled phase
# (bench/cmd/benchrun phase 7). When it is missing and we may
# install packages (root with apt-get), installs the distribution's pgbouncer
# package; otherwise says which package to install and fails.
set -euo pipefail

have_pgbouncer() {
  command -v pgbouncer >/dev/null 2>&1 && return 0
  [ -x /usr/sbin/pgbouncer ] && return 0
  return 1
}

have_pgbouncer && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "pgbouncer not found: installing Debian's pgbouncer package" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Another apt-get (a second make test on the machine) may hold the lock: wait up to 10 minutes for it.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  # The package's own service is not wanted: internal/pgbouncer starts its
  # own PgBouncer with a configuration in a temporary directory.
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends pgbouncer >/dev/null
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet pgbouncer 2>/dev/null; then
    systemctl stop pgbouncer || true
  fi
  have_pgbouncer && exit 0
fi

cat >&2 <<'MSG'
PgBouncer is not installed.
Install it, then run this again:
  Debian/Ubuntu: sudo apt-get install pgbouncer
  macOS:         brew install pgbouncer
MSG
exit 1
