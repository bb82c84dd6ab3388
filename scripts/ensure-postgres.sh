#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, postgres) and PgBouncer (for lock-postgres's
# pooler tests) are on this machine, installing them from the distribution's packages when they
# are missing. Starts nothing: the tests start their
# own throwaway servers (initdb in a temporary directory, a free loopback port) through
# lock-testkit and stop them by PID; a PostgreSQL already running here is never used.
# As root, lock-testkit runs initdb and postgres as the unprivileged user `postgres`, which the
# distribution's package creates.
set -euo pipefail

find_bindir() {
  if [ -n "${DISTLOCK_PG_BINDIR:-}" ] && [ -x "$DISTLOCK_PG_BINDIR/initdb" ]; then
    echo "$DISTLOCK_PG_BINDIR"; return 0
  fi
  if command -v pg_config >/dev/null 2>&1; then
    dir=$(pg_config --bindir 2>/dev/null || true)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

if ! find_bindir >/dev/null; then
  echo "PostgreSQL's initdb not found; installing it from the distribution's packages" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    # The package's post-install step may start a cluster on 5432; the tests never use it.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  elif command -v dnf >/dev/null 2>&1; then
    $sudo dnf install -y -q postgresql-server
  elif command -v apk >/dev/null 2>&1; then
    $sudo apk add --quiet postgresql
  elif command -v pacman >/dev/null 2>&1; then
    $sudo pacman -S --noconfirm --needed postgresql
  elif command -v brew >/dev/null 2>&1; then
    brew install postgresql
  else
    echo "error: no known package manager; install PostgreSQL >= 12 and rerun" >&2
    exit 1
  fi
  find_bindir >/dev/null || { echo "error: initdb still not found after installing" >&2; exit 1; }
fi

if [ "$(id -u)" -eq 0 ] && ! id "${DISTLOCK_PG_USER:-postgres}" >/dev/null 2>&1; then
  echo "error: running as root, but there is no user ${DISTLOCK_PG_USER:-postgres} to run" \
       "initdb and postgres as; create one or set DISTLOCK_PG_USER" >&2
  exit 1
fi

bindir=$(find_bindir)
version=$("$bindir/postgres" --version | sed -n 's/.* \([0-9][0-9]*\)[.0-9]*.*/\1/p' | head -1)
if [ -z "$version" ] || [ "$version" -lt 12 ]; then
  echo "error: PostgreSQL ${version:-of unknown version} found in $bindir; distlock needs >= 12" >&2
  exit 1
fi

find_pgbouncer() {
  if [ -n "${DISTLOCK_PGBOUNCER:-}" ] && [ -x "$DISTLOCK_PGBOUNCER" ]; then return 0; fi
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || [ -x /usr/bin/pgbouncer ]
}

if ! find_pgbouncer; then
  echo "pgbouncer not found; installing it from the distribution's packages" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    # The package may start its own pgbouncer on 6432; the tests start theirs on free ports.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pgbouncer >/dev/null \
      || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pgbouncer >/dev/null; }
  elif command -v dnf >/dev/null 2>&1; then
    $sudo dnf install -y -q pgbouncer
  elif command -v apk >/dev/null 2>&1; then
    $sudo apk add --quiet pgbouncer
  elif command -v pacman >/dev/null 2>&1; then
    $sudo pacman -S --noconfirm --needed pgbouncer
  elif command -v brew >/dev/null 2>&1; then
    brew install pgbouncer
  else
    echo "error: no known package manager; install pgbouncer and rerun" >&2
    exit 1
  fi
  find_pgbouncer || { echo "error: pgbouncer still not found after installing" >&2; exit 1; }
fi
