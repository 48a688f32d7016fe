#!/usr/bin/env bash
# Run the whole test suite. The browser tests need Debian's chromium; install it if we can.
set -euo pipefail
VENV="${VENV:-.venv}"
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test: installing Debian's chromium for the browser tests"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
exec "$VENV/bin/python" -m pytest -ra "$@"
