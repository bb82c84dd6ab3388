#!/usr/bin/env bash
# Makes sure libfaketime is on this machine, installing the distribution's `faketime` package
# (which pulls in `libfaketime`) when it is missing: the torture suite's clock scenarios start
# redis-server and PostgreSQL with libfaketime's `libfaketimeMT.so.1` preloaded, so that a test
# can move their clocks at runtime (lock-testkit's `FakeClock`). Starts nothing: the tests start
# their own servers on free loopback ports and stop them by PID. $DISTLOCK_FAKETIME_LIB names
# the library when it lives elsewhere.
set -euo pipefail

candidates=(
  "${DISTLOCK_FAKETIME_LIB:-}"
  /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
  /usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1
  /usr/lib/faketime/libfaketimeMT.so.1
  /usr/lib64/faketime/libfaketimeMT.so.1
)
have_lib() {
  local c
  for c in "${candidates[@]}"; do
    if [ -n "$c" ] && [ -f "$c" ]; then return 0; fi
  done
  return 1
}

if ! have_lib; then
  echo "libfaketime not found; installing it from the distribution's packages" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq faketime >/dev/null
  elif command -v dnf >/dev/null 2>&1; then
    $sudo dnf install -y -q libfaketime
  elif command -v apk >/dev/null 2>&1; then
    $sudo apk add --quiet libfaketime
  elif command -v pacman >/dev/null 2>&1; then
    $sudo pacman -S --noconfirm --needed libfaketime
  else
    echo "error: no known package manager; install libfaketime and rerun" >&2
    exit 1
  fi
  have_lib || { echo "error: libfaketimeMT.so.1 still not found after installing (set DISTLOCK_FAKETIME_LIB)" >&2; exit 1; }
fi
