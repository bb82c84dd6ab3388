#!/usr/bin/env bash
# Makes sure a Chromium and its chromedriver are on this machine, installing them from the
# distribution's packages when missing: `distlock serve`'s console is tested in a headless
# Chromium driven over WebDriver (distlock-cli/tests/it/serve_browser.rs). Starts nothing: the
# tests start chromedriver on a free loopback port and stop it by PID.
set -euo pipefail

chromium=${DISTLOCK_CHROMIUM:-/usr/bin/chromium}
driver=${DISTLOCK_CHROMEDRIVER:-chromedriver}
have_both() { [ -x "$chromium" ] && command -v "$driver" >/dev/null 2>&1; }

if ! have_both; then
  echo "chromium or chromedriver not found; installing them from the distribution's packages" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    # Debian names them chromium and chromium-driver (the driver is /usr/bin/chromedriver).
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
  elif command -v dnf >/dev/null 2>&1; then
    $sudo dnf install -y -q chromium chromedriver
  elif command -v apk >/dev/null 2>&1; then
    $sudo apk add --quiet chromium chromium-chromedriver
  elif command -v pacman >/dev/null 2>&1; then
    $sudo pacman -S --noconfirm --needed chromium
  else
    echo "error: no known package manager; install chromium and chromedriver and rerun" >&2
    exit 1
  fi
  if [ ! -x "$chromium" ] && command -v chromium >/dev/null 2>&1; then
    chromium=$(command -v chromium)
  fi
  have_both || { echo "error: chromium or chromedriver still not found after installing (set DISTLOCK_CHROMIUM, DISTLOCK_CHROMEDRIVER)" >&2; exit 1; }
fi
