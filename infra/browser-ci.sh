#!/usr/bin/env bash
# Make Debian's Chromium and its WebDriver available for the browser test of the web page.
#
#   bash infra/browser-ci.sh        # installs chromium + chromium-driver with apt-get if missing
#
# Prints the browser's path on stdout; everything else goes to stderr. The browser test runs
# whenever these are installed, and CI (CI=true) fails rather than skips when they are not.
set -euo pipefail

log() { echo "browser-ci: $*" >&2; }

have() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }

if ! have; then
    if [ "$(id -u)" != "0" ] && ! command -v sudo >/dev/null 2>&1; then
        log "chromium/chromedriver missing and not root: install chromium and chromium-driver"
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        log "chromium/chromedriver missing and apt-get not found: install chromium and its WebDriver (chromedriver)"
        exit 1
    fi
    SUDO=""
    [ "$(id -u)" = "0" ] || SUDO="sudo"
    log "installing chromium and chromium-driver (Debian packages)"
    $SUDO apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
        chromium chromium-driver fonts-dejavu-core >&2
fi
have || { log "chromium or chromedriver still missing after install"; exit 1; }
log "$(chromium --version 2>/dev/null | head -1); $(chromedriver --version 2>/dev/null | head -1)"
command -v chromium
