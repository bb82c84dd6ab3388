#!/usr/bin/env bash
# Makes sure MariaDB's server binaries (mariadbd, mariadb-install-db) and its client (mariadb,
# which lock-testkit uses to run SQL as root over the server's socket) are on this machine,
# installing the distribution's `mariadb-server` when they are missing. Starts nothing: the
# tests start their own throwaway servers (mariadb-install-db in a temporary directory, a free
# loopback port, the socket in that directory) through lock-testkit and stop them by PID; a
# MariaDB or MySQL already running here (on 3306) is never used. As root, lock-testkit runs
# mariadbd with --user=root.
set -euo pipefail

have() {
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1 || [ -x "/usr/sbin/$name" ] || [ -x "/usr/bin/$name" ]; then
      return 0
    fi
  done
  return 1
}

missing() {
  ! have mariadbd mysqld || ! have mariadb-install-db mysql_install_db || ! have mariadb mysql
}

if missing; then
  echo "MariaDB's server binaries not found; installing them from the distribution's packages" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    # The package's post-install step may start a server on 3306; the tests never use it.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mariadb-server >/dev/null \
      || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mariadb-server >/dev/null; }
  elif command -v dnf >/dev/null 2>&1; then
    $sudo dnf install -y -q mariadb-server
  elif command -v apk >/dev/null 2>&1; then
    $sudo apk add --quiet mariadb mariadb-client
  elif command -v pacman >/dev/null 2>&1; then
    $sudo pacman -S --noconfirm --needed mariadb
  elif command -v brew >/dev/null 2>&1; then
    brew install mariadb
  else
    echo "error: no known package manager; install MariaDB >= 10.6 (or MySQL >= 8.0) and rerun" >&2
    exit 1
  fi
  if missing; then
    echo "error: mariadbd, mariadb-install-db or mariadb still not found after installing" >&2
    exit 1
  fi
fi
