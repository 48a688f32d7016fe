"""bench/peak.py: a child's peak RSS is its own, not the benchmark process's."""

import subprocess
import sys

import pytest

from bench.peak import run_measured
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's counts")


def test_a_child_of_a_big_benchmark_is_measured_alone() -> None:
    hog = b"x" * (800 * 2**20)  # this process once held 800 MB: a model it made, say
    del hog
    small = [sys.executable, "-c", "pass"]
    status, _, peak_gb = run_measured(
        small, cwd=ROOT, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    assert status == 0 and peak_gb < 0.1
    big = [sys.executable, "-c", "x = b'y' * (300 * 2**20)\nraise SystemExit(3)"]
    status, _, peak_gb = run_measured(
        big, cwd=ROOT, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    assert status == 3 and 0.29 < peak_gb < 0.4
