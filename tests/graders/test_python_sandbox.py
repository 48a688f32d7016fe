"""Python graders run user code: each call confined in a child process. What a hostile or
broken grader tries is stopped and scored as an error; the caller goes on."""

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.graders.python_grader import PythonSandbox, SandboxLimits, landlock_abi
from app.graders.tools import SandboxOutcome
from tests.conftest import ROOT

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=5, memory_mb=512, disk_mb=1, concurrency=2)
SAMPLE = {"output_text": "Paris is the capital", "output_json": None}
ITEM = {"answer": "Paris"}


def own_namespaces() -> bool:
    """Whether a process here may take network and PID namespaces of its own (as the
    sandbox's child does: as root, or through an unprivileged user namespace)."""
    check = (
        "import ctypes, os, sys\n"
        "flags = 0x40000000 | 0x20000000 | (0 if os.geteuid() == 0 else 0x10000000)\n"
        "sys.exit(ctypes.CDLL(None).unshare(flags) != 0)\n"
    )
    return subprocess.run([sys.executable, "-c", check], check=False).returncode == 0


def run(source: str, limits: SandboxLimits = LIMITS) -> SandboxOutcome:
    return asyncio.run(PythonSandbox(limits).run(source, SAMPLE, ITEM))


def test_a_grader_scores_with_the_sample_and_the_item() -> None:
    source = "def grade(sample, item):\n    return float(item['answer'] in sample['output_text'])\n"
    assert run(source) == SandboxOutcome(value=1.0)
    numpy = "import numpy as np\n\ndef grade(sample, item):\n    return float(np.mean([1, 0]))\n"
    assert run(numpy).value == 0.5  # the installed libraries can be imported


@pytest.mark.parametrize(
    "body,words",
    [
        ("    return 1 / 0", "ZeroDivisionError"),
        ("    return 'yes'", "returned str, not a number"),
        ("    return float('nan')", "not a finite number"),
        ("    return True", "returned bool"),
    ],
)
def test_a_grader_that_fails_says_why(body: str, words: str) -> None:
    outcome = run(f"def grade(sample, item):\n{body}\n")
    assert outcome.value is None and words in (outcome.error or "")
    assert run("x = 1\n").error == "the source defines no function grade(sample, item)"


def test_cpu_wall_memory_and_disk_limits_stop_it() -> None:
    started = time.monotonic()
    spin = run("def grade(sample, item):\n    while True:\n        pass\n")
    assert spin.error == "stopped: used up its 2 s of CPU" and time.monotonic() - started < 5
    sleep = run("import time\n\ndef grade(sample, item):\n    time.sleep(60)\n")
    assert sleep.error == "stopped: still running after 5 s"
    hog = run("def grade(sample, item):\n    return len(bytearray(2 * 1024**3))\n")
    assert "MemoryError" in (hog.error or "")
    big = run(
        "def grade(sample, item):\n    open('x', 'w').write('a' * 2 * 1024**2)\n    return 1\n"
    )
    assert "File too large" in (big.error or "")


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock to confine files")
def test_it_cannot_read_the_services_files_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QATUNE_SECRET_KEY", "s3cret")
    for path in (ROOT / "app" / "core" / "config.py", Path("/etc/passwd"), Path.home()):
        read = f"os.listdir({str(path)!r}) if os.path.isdir({str(path)!r}) else open({str(path)!r})"
        source = f"import os\n\ndef grade(sample, item):\n    return len(list({read}))\n"
        outcome = run(source)
        assert outcome.value is None and "Permission denied" in (outcome.error or ""), path
    env = (
        "import os\n\ndef grade(sample, item):\n"
        "    return float(len(os.environ.get('QATUNE_SECRET_KEY', '')))\n"
    )
    assert run(env).value == 0.0
    qatune = "def grade(sample, item):\n    import app.core.config\n    return 1\n"
    assert run(qatune).value is None
    # Its own directory is its own: it writes and reads back there.
    scratch = (
        "def grade(sample, item):\n"
        "    open('note', 'w').write('ok')\n    return len(open('note').read())\n"
    )
    assert run(scratch).value == 2.0


@pytest.mark.skipif(landlock_abi() < 4, reason="this kernel's Landlock has no TCP rules")
def test_it_reaches_no_network() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[Any] = []
    listener.settimeout(6)
    thread = threading.Thread(target=lambda: _accept(listener, accepted))
    thread.start()
    source = (
        "import socket\n\ndef grade(sample, item):\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    return 1\n"
    )
    outcome = run(source)
    thread.join()
    listener.close()
    assert outcome.value is None and not accepted


def _accept(listener: socket.socket, accepted: list[Any]) -> None:
    try:
        accepted.append(listener.accept())
    except OSError:
        pass


@pytest.mark.skipif(not own_namespaces(), reason="no PID namespace can be made here")
def test_nothing_it_starts_outlives_it() -> None:
    name = "qt" + secrets.token_hex(5)  # a process name to look for afterwards
    source = f"""
import ctypes, os, time

def grade(sample, item):
    if os.fork() == 0:
        os.setsid()
        ctypes.CDLL(None).prctl(15, b"{name}", 0, 0, 0)  # PR_SET_NAME
        time.sleep(600)
    time.sleep(0.5)
    return 0.5
"""
    assert run(source).value == 0.5
    time.sleep(0.5)
    names = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            pass
    assert name not in names


def test_at_most_concurrency_run_at_once() -> None:
    source = "import time\n\ndef grade(sample, item):\n    time.sleep(1)\n    return 1\n"
    sandbox = PythonSandbox(SandboxLimits(wall_seconds=10, concurrency=2))

    async def four() -> list[SandboxOutcome]:
        return list(await asyncio.gather(*(sandbox.run(source, SAMPLE, ITEM) for _ in range(4))))

    started = time.monotonic()
    outcomes = asyncio.run(four())
    assert [o.value for o in outcomes] == [1.0] * 4
    assert time.monotonic() - started >= 2.0  # two at a time: two rounds of a second
