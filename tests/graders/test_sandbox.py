"""Python graders run user code: each call confined in a child process that fails closed.

Every attack here was once tried against the service from outside (docs/reliability.md);
each is refused, scored as the grader's error, and leaves nothing behind. The whole file
runs twice: as the user running the tests (root in CI) and, through
`test_the_same_attacks_fail_for_a_service_that_is_not_root`, as an unprivileged user.
"""

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.core.config import PROTECTIONS
from app.graders.sandbox import confine, seccomp
from app.graders.sandbox.linux import this_arch
from app.graders.sandbox.runner import PythonSandbox, SandboxLimits
from app.graders.tools import SandboxOutcome
from tests.conftest import ROOT
from tests.graders.as_user import run_as_nobody
from tests.graders.processes import gone, processes_named

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=5, memory_mb=512, disk_mb=1, processes=16)
SAMPLE = {"output_text": "Paris is the capital", "output_json": None}
ITEM = {"answer": "Paris"}
AS_NOBODY = "QATUNE_TEST_SANDBOX_AS_NOBODY"


def run(source: str, limits: SandboxLimits = LIMITS, item: Any = ITEM) -> SandboxOutcome:
    return asyncio.run(PythonSandbox(limits).run(source, SAMPLE, item))


def grader(body: str, imports: str = "import os") -> str:
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"{imports}\n\ndef grade(sample, item):\n{lines}\n"


def refused(outcome: SandboxOutcome, *words: str) -> bool:
    return outcome.value is None and any(word in (outcome.error or "") for word in words)


# What a grader may do


def test_a_grader_scores_with_the_sample_and_the_item() -> None:
    source = "def grade(sample, item):\n    return float(item['answer'] in sample['output_text'])\n"
    assert run(source) == SandboxOutcome(value=1.0)
    numpy = "import numpy as np\n\ndef grade(sample, item):\n    return float(np.mean([1, 0]))\n"
    assert run(numpy).value == 0.5  # the installed libraries can be imported
    scratch = grader("open('note', 'w').write('ok')\nreturn len(open('/tmp/note').read())")
    assert run(scratch).value == 2.0  # its own directory is its own
    threads = grader(
        "import asyncio, concurrent.futures\n"
        "with concurrent.futures.ThreadPoolExecutor(4) as pool:\n"
        "    done = sum(pool.map(abs, [-1, -2, -3]))\n"
        "return done + asyncio.run(asyncio.sleep(0, 1))"
    )
    assert run(threads).value == 7.0  # threads and an event loop (its socketpair) work


@pytest.mark.parametrize(
    "body,words",
    [
        ("    return 1 / 0", "ZeroDivisionError"),
        ("    return 'yes'", "returned str, not a number"),
        ("    return float('nan')", "not a finite number"),
        ("    return float('inf')", "not a finite number"),
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
    sleep = run(grader("time.sleep(60)", "import time"))
    assert sleep.error == "stopped: still running after 5 s"
    hog = run(grader("return len(bytearray(2 * 1024**3))"))
    assert "MemoryError" in (hog.error or "")
    big = run(grader("open('x', 'w').write('a' * 2 * 1024**2)\nreturn 1"))
    assert "File too large" in (big.error or "")


# What a hostile grader tries


def test_it_has_no_privileges_whatever_user_the_service_is() -> None:
    capget = grader(
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "header = (ctypes.c_uint32 * 2)(0x20080522, 0)\n"
        "data = (ctypes.c_uint32 * 6)()\n"
        "assert libc.capget(header, data) == 0\n"
        "return float(sum(data))",
        "import ctypes",
    )
    assert run(capget).value == 0.0  # no effective, permitted or inheritable capability
    for attack, words in [
        ("os.mknod('disk', 0o600 | 0o060000, os.makedev(8, 0))", "Operation not permitted"),
        ("os.mknod('tty', 0o600 | 0o020000, os.makedev(4, 1))", "Operation not permitted"),
        ("os.mkfifo('pipe')", "Operation not permitted"),
        ("socket.gethostname(); ctypes.CDLL(None, use_errno=True).sethostname(b'x', 1) == 0 "
         "or (_ for _ in ()).throw(OSError(ctypes.get_errno(), 'sethostname'))", "sethostname"),
        ("os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))", "Operation not permitted"),
        ("os.setpriority(os.PRIO_PROCESS, 0, -5)", "Permission denied"),
        ("os.setuid(12345)", ("Operation not permitted", "Invalid argument")),
        ("os.chroot('/tmp')", "Operation not permitted"),
    ]:  # fmt: skip
        source = grader(f"{attack}\nreturn 1", "import ctypes, os, socket")
        assert refused(run(source), *([words] if isinstance(words, str) else words)), attack
    assert socket.gethostname() != "x"


def test_it_cannot_make_a_file_the_service_cannot_remove() -> None:
    before = set(Path(tempfile.gettempdir()).glob("qatune-grader-*"))
    immutable = grader(
        "fd = os.open('locked', os.O_CREAT | os.O_RDONLY)\n"
        "flags = ctypes.c_int(0x10)  # FS_IMMUTABLE_FL\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.ioctl(fd, 0x40086602, ctypes.byref(flags)) != 0:  # FS_IOC_SETFLAGS\n"
        "    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
        "return 1",
        "import ctypes, os",
    )
    assert refused(run(immutable), "Operation not permitted", "Inappropriate ioctl")
    assert set(Path(tempfile.gettempdir()).glob("qatune-grader-*")) <= before


def test_a_fork_bomb_stops_at_the_process_limit_and_leaves_nothing() -> None:
    name = "qf" + secrets.token_hex(5)
    bomb = grader(
        f"ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n"
        "started = 0\n"
        "for _ in range(1000):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        started += 1\n"
        "    except OSError:\n"
        "        break\n"
        "return started",
        "import ctypes, os, time",
    )
    outcome = run(bomb)
    assert outcome.value is not None and outcome.value < LIMITS.processes, outcome
    assert gone(name)


def test_it_reaches_no_socket_of_the_host() -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "service.sock")
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(path)
        os.chmod(directory, 0o755)
        os.chmod(path, 0o777)
        unix.listen()
        tcp = socket.create_server(("127.0.0.1", 0))
        attacks = [
            f"s = socket.socket(socket.AF_UNIX); s.connect({path!r})",
            "s = socket.socket(socket.AF_UNIX); s.connect('\\0qatune-abstract')",
            f"socket.create_connection(('127.0.0.1', {tcp.getsockname()[1]}), timeout=1)",
            "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)",
            "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
        ]
        for attack in attacks:
            assert refused(run(grader(f"{attack}\nreturn 1", "import socket")), "Error"), attack
        for listener in (unix, tcp):
            listener.setblocking(False)
            with pytest.raises(BlockingIOError):
                listener.accept()
            listener.close()


def test_it_cannot_read_the_services_files_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QATUNE_SECRET_KEY", "s3cret")
    for path in (ROOT / "app" / "core" / "config.py", "/etc/passwd", Path.home(), "/proc/1"):
        source = grader(
            f"return len(os.listdir({str(path)!r}) if os.path.isdir({str(path)!r}) "
            f"else open({str(path)!r}).read())"
        )
        assert refused(run(source), "No such file", "Permission denied"), path
    env = grader("return float(len(os.environ.get('QATUNE_SECRET_KEY', '')))")
    assert run(env).value == 0.0
    assert run(grader("import app.core.config\nreturn 1")).value is None
    writes = grader(f"open({str(ROOT / 'pwned')!r}, 'w')\nreturn 1")
    assert run(writes).value is None and not (ROOT / "pwned").exists()


def test_it_cannot_reach_the_service_or_the_kernels_shared_state() -> None:
    attacks = {
        "signal the service": f"os.kill({os.getpid()}, signal.SIGKILL)",
        "signal everyone": "os.kill(-1, signal.SIGKILL)",
        "trace": "libc.ptrace(16, 1, 0, 0) == 0 or fail('ptrace')",  # PTRACE_ATTACH
        "new namespaces": "libc.unshare(0x10000000) == 0 or fail('unshare')",
        "io_uring": f"libc.syscall({this_arch().numbers['io_uring_setup']}, 8, "
        "ctypes.create_string_buffer(120)) >= 0 or fail('io_uring')",
        "a keyring": f"libc.syscall({this_arch().numbers['add_key']}, b'user', b'k', b'v', 1, "
        "-4) >= 0 or fail('add_key')",  # KEY_SPEC_USER_KEYRING
        "bpf": f"libc.syscall({this_arch().numbers['bpf']}, 0, 0, 0) >= 0 or fail('bpf')",
        "mount": "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0 or fail('mount')",
    }
    prelude = (
        "import ctypes, os, signal\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def fail(call):\n"
        "    raise OSError(ctypes.get_errno(), call)\n"
    )
    for what, attack in attacks.items():
        source = prelude + f"\ndef grade(sample, item):\n    {attack}\n    return 1\n"
        outcome = run(source)
        if what == "signal everyone":  # its own namespace: it ends itself, nothing else
            assert outcome.value is None, outcome
        else:
            assert refused(outcome, "Error", "not permitted"), (what, outcome)
    assert os.getppid() > 0  # the test process is still here


def test_shared_memory_ends_with_the_grader() -> None:
    def keys() -> set[int]:  # other programs (a browser, PostgreSQL) make and change their own
        rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        return {int(row.split()[0]) for row in rows}

    assert 0x51A7 not in keys()
    shm = grader(
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "made = libc.shmget(0x51A7, 64 * 1024 * 1024, 0o1666)  # IPC_CREAT | 0666\n"
        "return float(made >= 0)",
        "import ctypes",
    )
    assert run(shm).value == 1.0  # made in its own IPC namespace...
    assert 0x51A7 not in keys()  # ...which went with it


def test_nothing_it_starts_outlives_it() -> None:
    name = "qt" + secrets.token_hex(5)
    source = grader(
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n"
        "    time.sleep(600)\n"
        "time.sleep(0.5)\n"
        "return 0.5",
        "import ctypes, os, time",
    )
    assert run(source).value == 0.5
    assert gone(name)


def test_nothing_outlives_a_service_killed_mid_call() -> None:
    name = "qk" + secrets.token_hex(5)
    source = grader(
        f"ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\ntime.sleep(60)\nreturn 1",
        "import ctypes, time",
    )
    service = subprocess.Popen(
        [sys.executable, "-c", _SERVICE, json.dumps(source)], cwd=ROOT, stdout=subprocess.PIPE
    )
    deadline = time.monotonic() + 10
    while not processes_named(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_named(name), "the grader never started"
    service.send_signal(signal.SIGKILL)
    service.wait()
    assert gone(name)


_SERVICE = """
import asyncio, json, sys
from app.graders.sandbox.runner import PythonSandbox, SandboxLimits
asyncio.run(PythonSandbox(SandboxLimits(wall_seconds=60)).run(json.loads(sys.argv[1]), {}, {}))
"""


@pytest.mark.parametrize(
    "writes",
    [
        b'{"value": "x"}',
        b'{"value": NaN}',
        b'{"value": 1e999}',
        b'{"value": 1, "protections": ["forged"]}',
        b"[" * 60000,
        b"x" * 100000,
    ],
)
def test_whatever_it_writes_back_is_checked(writes: bytes) -> None:
    """It finds the pipe its result goes back through and writes there itself."""
    forged = grader(
        "for fd in range(3, 64):\n"
        "    try:\n"
        f"        os.write(fd, {writes!r})\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)"
    )
    outcome = run(forged)
    assert outcome.value is None and outcome.server_error is None, outcome
    assert refused(outcome, "not a number", "not a finite number", "not a score", "64 KiB")


# Turns, cancelling and failing closed


def test_one_users_slow_graders_do_not_hold_back_another_users() -> None:
    sandbox = PythonSandbox(SandboxLimits(wall_seconds=20, concurrency=2))
    slow = grader("time.sleep(1.5)\nreturn 1", "import time")
    quick = grader("return 2")

    async def both() -> float:
        hogging = [asyncio.create_task(sandbox.run(slow, {}, {}, "mallory")) for _ in range(8)]
        await asyncio.sleep(0.3)
        asked = time.monotonic()
        assert (await sandbox.run(quick, {}, {}, "alice")).value == 2.0
        waited = time.monotonic() - asked
        await asyncio.gather(*hogging)
        return waited

    assert asyncio.run(both()) < 2.0  # one of mallory's calls ahead of it, not eight


def test_a_call_waits_for_its_turn_no_longer_than_the_bound() -> None:
    sandbox = PythonSandbox(SandboxLimits(wall_seconds=10, concurrency=1, queue_seconds=0.5))

    async def two() -> list[SandboxOutcome]:
        slow = grader("time.sleep(2)\nreturn 1", "import time")
        return list(await asyncio.gather(sandbox.run(slow, {}, {}), sandbox.run(slow, {}, {})))

    first, second = asyncio.run(two())
    assert first.value == 1.0
    assert "busy" in (second.server_error or "")


def test_a_cancelled_call_ends_its_grader_at_once() -> None:
    name = "qc" + secrets.token_hex(5)
    source = grader(
        f"ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\ntime.sleep(60)\nreturn 1",
        "import ctypes, time",
    )

    async def cancelled() -> None:
        call = asyncio.create_task(PythonSandbox(LIMITS).run(source, {}, {}))
        while not processes_named(name):
            await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(asyncio.wait_for(cancelled(), 10))
    assert gone(name, within=1.0)


def test_the_child_keeps_the_wall_limit_itself() -> None:
    """The service's side is the second clock: the child ends a late grader on its own."""
    limits = {"cpu_seconds": 5, "wall_seconds": 1, "memory_mb": 512, "disk_mb": 1}
    reply = _child({"source": grader("time.sleep(30)", "import time")}, limits | {"processes": 8})
    assert reply["outcome"] == {"late": True}


@pytest.mark.parametrize("missing", ["namespaces", "landlock"])
def test_a_protection_that_cannot_be_applied_refuses_the_call(missing: str) -> None:
    refused_calls = {"namespaces": "unshare", "landlock": "landlock_create_ruleset"}
    limits = {"cpu_seconds": 5, "wall_seconds": 5, "memory_mb": 512, "disk_mb": 1, "processes": 8}
    call = {"source": grader("return 1")}
    reply = _child(call, limits, deny=refused_calls[missing])
    assert reply["outcome"]["refused"].startswith(f"{missing}:"), reply
    # ...unless an administrator accepted running without it, by name: the report says so.
    without = ("namespaces", "filesystem") if missing == "namespaces" else (missing,)
    reply = _child(call, limits, deny=refused_calls[missing], without=without)
    assert any(p.startswith(f"without {missing}") for p in reply["protections"]), reply
    if missing == "landlock":  # the others still hold
        assert reply["outcome"] == {"value": 1.0}


def test_the_protections_named_in_the_settings_are_the_sandboxs() -> None:
    assert confine.STEPS == PROTECTIONS


def test_the_filter_refuses_what_no_grader_needs() -> None:
    rows = seccomp.program(this_arch())
    assert len(rows) < 256 and all(jt < 256 for _, jt, _, _ in rows)  # BPF's jumps


_WRAPPER = """
import ctypes, json, os, sys
from app.graders.sandbox import seccomp
from app.graders.sandbox.linux import libc, this_arch
number = this_arch().numbers[sys.argv[1]]
rows = [(seccomp.LOAD, 0, 0, seccomp.NR), (seccomp.JEQ, 0, 1, number),
        (seccomp.RETURN, 0, 0, seccomp.ERRNO | 1), (seccomp.RETURN, 0, 0, seccomp.ALLOW)]
program = (seccomp.Instruction * 4)(*(seccomp.Instruction(*row) for row in rows))
libc.prctl(38, 1, 0, 0, 0)
libc.prctl(22, 2, ctypes.byref(seccomp.Program(4, program)), 0, 0)
os.execv(sys.executable, [sys.executable, "-I", "-m", "app.graders.sandbox.child", sys.argv[2]])
"""


def _child(
    call: dict[str, Any],
    limits: dict[str, Any],
    deny: str | None = None,
    without: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The child started directly (no service side), under a filter refusing `deny`."""
    with tempfile.TemporaryDirectory() as workdir:
        Path(workdir, "root").mkdir()
        Path(workdir, "scratch").mkdir()
        if os.geteuid() == 0:
            os.chown(Path(workdir, "scratch"), LIMITS.uid, LIMITS.uid)
        request = call | {
            "sample": {},
            "item": {},
            "root": f"{workdir}/root",
            "scratch": f"{workdir}/scratch",
            "uid": LIMITS.uid,
            "without": list(without),
            "limits": limits,
        }
        owner = str(os.getpid())
        argv = [sys.executable, "-I", "-m", "app.graders.sandbox.child", owner]
        if deny:
            argv = [sys.executable, "-c", _WRAPPER, deny, owner]
        done = subprocess.run(
            argv, input=json.dumps(request), capture_output=True, text=True, timeout=30, cwd=ROOT
        )
        return json.loads(done.stdout)


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another user needs root")
def test_the_same_attacks_fail_for_a_service_that_is_not_root(tmp_path: Path) -> None:
    """This file again, as `nobody`: the child then confines itself in a user namespace."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        AS_NOBODY: "1",
    }
    os.chmod(tmp_path, 0o777)
    done = run_as_nobody(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--basetemp", str(tmp_path / "pytest"), "-x", __file__],
        env=env,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout


def test_the_unprivileged_run_is_unprivileged() -> None:
    if os.environ.get(AS_NOBODY):
        assert os.geteuid() == 65534
        outcome = run(grader("return float(os.getuid())"))
        assert outcome.value == 0.0  # root of its own user namespace, with no capability


_ = threading  # (the API tests run a grader beside /health: tests/api/test_graders.py)
