#!/usr/bin/env bash
# Makes sure a Chromium the console's browser tests can drive is on this
# machine (e2e/console_test.go, with chromedp). When it is missing and we
# may install packages (root with apt-get), installs Debian's chromium
# package; otherwise says what to install and fails. A browser build
# downloaded by a tool of its own is never used: the distribution's package
# is the one that installs everywhere the project runs.
#
# Prints the browser's path on success. CHROMIUM_PATH, when set, names the
# browser to use and is only checked.
set -euo pipefail

find_chromium() {
  if [ -n "${CHROMIUM_PATH:-}" ]; then
    [ -x "$CHROMIUM_PATH" ] && { echo "$CHROMIUM_PATH"; return 0; }
    return 1
  fi
  for c in chromium chromium-browser google-chrome-stable google-chrome; do
    if p=$(command -v "$c" 2>/dev/null); then
      echo "$p"
      return 0
    fi
  done
  for p in /usr/bin/chromium /usr/lib/chromium/chromium \
           "/Applications/Chromium.app/Contents/MacOS/Chromium" \
           "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"; do
    [ -x "$p" ] && { echo "$p"; return 0; }
  done
  return 1
}

find_chromium && exit 0

if [ -n "${CHROMIUM_PATH:-}" ]; then
  echo "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable file" >&2
  exit 1
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Chromium not found: installing Debian's chromium package (for the console's browser tests)" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Another apt-get (a second make test on the machine) may hold the lock: wait up to 10 minutes for it.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  find_chromium && exit 0
fi

cat >&2 <<'MSG'
Chromium is not installed; the console's browser tests (e2e/console_test.go) need it.
Install it, then run this again:
  Debian/Ubuntu: sudo apt-get install chromium      (Ubuntu: chromium-browser)
  macOS:         brew install --cask chromium
Or name a Chromium or Chrome binary you have: CHROMIUM_PATH=/path/to/chrome make test
MSG
exit 1
