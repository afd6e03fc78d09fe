#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, postgres) are on this
# machine. When they are missing and we may install packages (root with
# apt-get), installs the distribution's postgresql package; otherwise says
# which package to install and fails.
set -euo pipefail

have_pg() {
  command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1 && return 0
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && return 0
  compgen -G '/opt/homebrew/opt/postgresql*/bin/initdb' >/dev/null && return 0
  compgen -G '/usr/local/opt/postgresql*/bin/initdb' >/dev/null && return 0
  return 1
}

have_pg && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "PostgreSQL server binaries not found: installing Debian's postgresql package" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Another apt-get (a second make test on the machine) may hold the lock: wait up to 10 minutes for it.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq postgresql >/dev/null
  have_pg && exit 0
fi

cat >&2 <<'MSG'
PostgreSQL server binaries (initdb, postgres) are not installed.
Install them, then run this again:
  Debian/Ubuntu: sudo apt-get install postgresql
  macOS:         brew install postgresql@15
Or point the tests at a server you have: TEST_DATABASE_URL=postgres://... make test
MSG
exit 1
