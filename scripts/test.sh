#!/usr/bin/env bash
# Run the whole test suite. The browser tests need Debian's chromium; install it if we can,
# and a CJK font, so that the Chinese UI's screenshots show characters rather than boxes.
# The API and service tests run on PostgreSQL too: Debian's postgresql (tests/postgres.py
# starts a throwaway cluster; it does not use the system's own). Go's text/template checks the
# Ollama Modelfile's template: Debian's golang-go.
set -euo pipefail
VENV="${VENV:-.venv}"
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
fc-list 2>/dev/null | grep -qi wenquanyi || missing+=(fonts-wqy-microhei)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v go >/dev/null || missing+=(golang-go)  # renders Ollama templates as Ollama does
command -v docker-compose >/dev/null || missing+=(docker-compose)  # parses docker-compose.yml
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test: installing Debian's ${missing[*]} for the browser and PostgreSQL tests"
  compose=()  # alone, without what it recommends: docker.io and containerd (~250 MB); the
  # tests only parse the compose file
  for i in "${!missing[@]}"; do
    [ "${missing[$i]}" != docker-compose ] || { compose=(docker-compose); unset "missing[$i]"; }
  done
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  [ ${#missing[@]} -eq 0 ] || apt-get install -y -qq "${missing[@]}" >/dev/null
  [ ${#compose[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi
# The suite starts a few hundred Python processes that import qatune (servers, their fork
# servers, the command line), and three pytest processes that import every test module:
# where PYTHONDONTWRITEBYTECODE is set none of them would keep what it compiled, and each
# would compile qatune anew (~0.4 s of a core) and rewrite the tests' asserts anew (~6 s).
unset PYTHONDONTWRITEBYTECODE
PYTEST=("$VENV/bin/python" -m pytest -ra)
if [ $# -gt 0 ]; then  # a subset: as asked, in one process
  exec "${PYTEST[@]}" "$@"
fi
# The whole suite. Most tests wait on server starts, sockets and polls, so two run at once
# (three were slower still: the CPU-heavy ones then collide more often than waits overlap):
# a test at a time to whichever worker is free, longest first (tests/conftest.py), the Ray
# tests, each of which starts a cluster, all on one worker (`xdist_group`). The few that
# measure the machine itself (a latency bound, the CPU share, a wall-clock limit) run
# afterwards, alone. Both phases always run; the exit status is the first failure's.
status=0
"${PYTEST[@]}" --durations=40 -n 2 --dist loadgroup -m "not serial" || status=$?
# Only the files that hold them are collected: importing all of them is ~15 s of a core.
mapfile -t serial < <(grep -rl --include='test_*.py' '@pytest.mark.serial' tests)
"${PYTEST[@]}" -m serial -p no:xdist "${serial[@]}" || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
exit "$status"
