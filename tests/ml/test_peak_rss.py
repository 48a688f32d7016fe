"""A process's peak RSS is its own, whoever started it and whatever that one once held."""

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's counts")

HOG_MB = 800


def test_a_job_started_by_a_big_process_reports_its_own_peak() -> None:
    # Python starts children with vfork, and exec hands the parent's high-water mark on as
    # the child's (getrusage): a `qatune train` run by a program that had loaded a model
    # reported that model as its own peak.
    parent = textwrap.dedent(
        f"""
        import resource, subprocess, sys
        hog = b"x" * ({HOG_MB} * 2**20)  # written: resident
        del hog
        child = "from app.ml.memory import memory_snapshot; print(memory_snapshot().peak_rss_mb)"
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                             check=True).stdout
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, out)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", parent], cwd=ROOT, capture_output=True, text=True, check=True
    )
    parents_peak, childs_peak = map(float, done.stdout.split())
    assert parents_peak > HOG_MB  # the hog was there to be inherited
    assert childs_peak < HOG_MB / 2, done.stdout
