#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the report page's browser test
# (tests/test_report_page.py). Idempotent: installs only what is missing. Needs root.
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
  echo "chromium: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    </dev/null >/tmp/chromium-apt.log 2>&1 || {
    tail -n 30 /tmp/chromium-apt.log >&2
    echo "chromium: apt-get install failed (full log /tmp/chromium-apt.log)" >&2
    exit 1
  }
fi
chromium --version
chromedriver --version
