"""How training children start: from the fork server, or spawned where it cannot run."""

import gc
import os
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from tests.conftest import ROOT

# How children start, and the collector as a child finds it: on, with the fork server's
# imports frozen out of its reach (app/core/loading.py).
START_A_CHILD = """
from app.worker.local import training_processes
from tests.worker.test_local import report_collector
processes = training_processes()
receiver, sender = processes.Pipe(duplex=False)
child = processes.Process(target=report_collector, args=(sender,))
child.start()
print(processes.get_start_method(), *receiver.recv())
child.join()
"""


def report_collector(sender: Connection) -> None:
    sender.send((gc.isenabled(), gc.get_freeze_count()))


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
        [sys.executable, "-c", START_A_CHILD],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    started_by, collecting, frozen = done.stdout.split()[-3:]
    assert started_by == method
    assert collecting == "True"
    # forked: torch, transformers and peft came frozen; spawned: nothing loaded yet
    assert (int(frozen) > 500_000) == (method == "forkserver"), frozen
    assert ("fork server did not start" in done.stderr) == (method == "spawn")
