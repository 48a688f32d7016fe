#!/usr/bin/env bash
# Run the whole test suite. The browser tests need Debian's chromium; install it if we can,
# and a CJK font, so that the Chinese UI's screenshots show characters rather than boxes.
set -euo pipefail
VENV="${VENV:-.venv}"
if { [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi wenquanyi; } \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test: installing Debian's chromium and a CJK font for the browser tests"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null
fi
exec "$VENV/bin/python" -m pytest -ra "$@"
