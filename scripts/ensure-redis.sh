#!/usr/bin/env bash
# Makes sure a redis-server >= 7.0 is on this machine, installing it from the distribution's
# packages when it is missing. Starts nothing: the tests and the demo start their own throwaway
# servers on free loopback ports and stop them by PID.
set -euo pipefail

have_redis() { command -v "${DISTLOCK_REDIS_SERVER:-redis-server}" >/dev/null 2>&1; }

if ! have_redis; then
  echo "redis-server not found; installing it from the distribution's packages" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
  elif command -v dnf >/dev/null 2>&1; then
    $sudo dnf install -y -q redis
  elif command -v apk >/dev/null 2>&1; then
    $sudo apk add --quiet redis
  elif command -v pacman >/dev/null 2>&1; then
    $sudo pacman -S --noconfirm --needed redis
  elif command -v brew >/dev/null 2>&1; then
    brew install redis
  else
    echo "error: no known package manager; install redis-server >= 7.0 and rerun" >&2
    exit 1
  fi
  have_redis || { echo "error: redis-server still not found after installing" >&2; exit 1; }
fi

# distlock's acquire script uses SET ... NX ... GET, which Redis added in 7.0.
version=$("${DISTLOCK_REDIS_SERVER:-redis-server}" --version | sed -n 's/.* v=\([0-9][0-9.]*\).*/\1/p')
major=${version%%.*}
if [ -z "$major" ] || [ "$major" -lt 7 ]; then
  echo "error: redis-server ${version:-of unknown version} found; distlock needs Redis >= 7.0" >&2
  exit 1
fi
