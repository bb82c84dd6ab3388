#!/usr/bin/env bash
# Makes sure Prometheus' `promtool` is on this machine (it checks the alert rules and the
# dashboard's queries: examples/axum_service/check-alerts.sh), installing Debian's `prometheus`
# package when it is missing. Starts nothing: the package's service is not run here (no
# systemd in the test machines; `policy-rc.d` is set for the install so it is never started).
set -euo pipefail

command -v promtool >/dev/null 2>&1 && exit 0
echo "promtool not found; installing Debian's prometheus package" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: no apt-get; install promtool (Prometheus' release tarball has it) and rerun" >&2
  exit 1
fi
# No service may start during the install (exit 101: "action forbidden by policy").
policy=/usr/sbin/policy-rc.d
restore=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  restore="yes"
fi
trap 'if [ -n "$restore" ]; then $sudo rm -f "$policy"; fi' EXIT
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null 2>&1 || { echo "error: promtool still not found after installing" >&2; exit 1; }
