"""How training children start: from the fork server, or spawned where it cannot run."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

START_METHOD = "from app.worker.local import training_processes as t; print(t().get_start_method())"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's")
@pytest.mark.parametrize(
    ("name_length", "method"),
    [pytest.param(8, "forkserver", marks=pytest.mark.slow), (120, "spawn")],  # slow: a server
)
def test_children_fork_from_the_server_unless_its_socket_path_is_too_long(
    name_length: int, method: str
) -> None:
    """The fork server's socket lives under TMPDIR, and a socket's path has at most 107
    bytes: under a long TMPDIR the service still starts, spawning its children."""
    # Under /tmp itself: pytest's own tmp_path can be long enough already (under xdist).
    tmpdir = Path(tempfile.mkdtemp(dir="/tmp")) / ("t" * name_length)
    tmpdir.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", START_METHOD],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == method
    assert ("fork server did not start" in done.stderr) == (method == "spawn")
