"""The service's side of the python graders' sandbox: `PythonSandbox.run`.

A call waits for a turn (turns.py: fair between users, bounded by `queue_seconds`), then
runs in a child (child.py) started with an empty environment in a new session, whose
output is read on a thread of its own: at most 64 KiB kept of each stream, the child's
process group killed at the wall-clock limit (plus a grace: the child keeps the limit
itself) or as soon as the caller is cancelled (a client that went away, an eval run
cancelled), and the child's one line of JSON checked before anything in it is believed.
"""

import asyncio
import concurrent.futures
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loguru import logger

from app.core.language import deferred, tr
from app.graders.sandbox import reaper
from app.graders.sandbox.turns import Turns
from app.graders.tools import SandboxOutcome

CHILD_MODULE = "app.graders.sandbox.child"
OUTPUT_CAP = 64 * 1024  # bytes of each of the child's streams kept
GRACE_SECONDS = 5.0  # the child kills a late grader itself; this side waits a little longer
ENVIRONMENT = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",  # numpy's thread pools would spend the process limit
    "OPENBLAS_NUM_THREADS": "1",
}
CHILD_LIMITS = ("cpu_seconds", "wall_seconds", "memory_mb", "disk_mb", "processes")
PROTECTIONS_KEPT = 32  # distinct reports logged, at most
SIGNALS = {
    signal.SIGXFSZ: deferred("the grader wrote a file past its size limit"),
    signal.SIGKILL: deferred("the grader was killed"),
    signal.SIGSEGV: deferred("the grader crashed"),
}


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 10
    wall_seconds: float = 30.0
    memory_mb: int = 1024  # address space of each process
    disk_mb: int = 16  # the largest file it writes
    processes: int = 16  # processes and threads, the grader's own included
    concurrency: int = 2  # calls running at once in one process; more wait their turn
    queue_seconds: float = 300.0  # the longest a call waits for its turn
    uid: int = 1_900_000_000  # as root: the first of the sandboxes' user IDs, one a slot
    without: frozenset[str] = field(default_factory=frozenset)  # protections it may lack

    def in_training(self) -> "SandboxLimits":
        """A training process's graders run as the user IDs after the service's own."""
        return replace(self, uid=self.uid + self.concurrency)


class PythonSandbox:
    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Turns] = (
            weakref.WeakKeyDictionary()
        )
        self._told: set[str] = set()
        reaper.reap()  # what a service killed before this one may have left

    def for_owner(self, owner: str) -> "OwnedSandbox":
        return OwnedSandbox(self, owner)

    async def run(
        self, source: str, sample: dict[str, Any], item: Any, owner: str = ""
    ) -> SandboxOutcome:
        loop = asyncio.get_running_loop()
        turns = self._turns.setdefault(loop, Turns(self.limits.concurrency))
        try:
            async with asyncio.timeout(self.limits.queue_seconds):
                slot = await turns.take(owner)
        except TimeoutError:
            return SandboxOutcome(
                server_error=tr(
                    "the sandbox is busy: no turn came within {seconds:g} s",
                    seconds=self.limits.queue_seconds,
                )
            )
        try:
            reaper.reap_now_and_then()
            request = {"source": source, "sample": sample, "item": item}
            return await self._call(slot, request)
        finally:
            turns.give_back(slot)

    async def _call(self, slot: int, request: dict[str, Any]) -> SandboxOutcome:
        child = ChildCall(self.limits, self.limits.uid + slot, request)
        threading.Thread(target=child.run, name="grader-sandbox", daemon=True).start()
        try:
            ended = await asyncio.wrap_future(child.ended)
        except asyncio.CancelledError:
            child.kill()  # nobody waits for this grade any more
            raise
        return self._outcome(ended)

    def _outcome(self, ended: "Ended") -> SandboxOutcome:
        if ended.failed_to_start is not None:
            return SandboxOutcome(
                server_error=tr("the sandbox could not start: {exc}", exc=ended.failed_to_start)
            )
        if ended.late:
            return _late(self.limits.wall_seconds)
        report = _report(ended.out)
        if report is None:
            return self._no_report(ended)
        outcome, protections = report
        self._tell(protections)
        return self._read(outcome)

    def _read(self, outcome: dict[str, Any]) -> SandboxOutcome:
        kind = next(iter(outcome))
        match kind, outcome[kind]:
            case "value", float() | int() as value if _finite(value):
                return SandboxOutcome(value=float(value))
            case "error", str() as why:
                return SandboxOutcome(error=why[-4000:])
            case "late", True:
                return _late(self.limits.wall_seconds)
            case "cpu", True:
                return SandboxOutcome(
                    error=tr(
                        "stopped: used up its {seconds} s of CPU", seconds=self.limits.cpu_seconds
                    )
                )
            case "signal", int() as number:
                return SandboxOutcome(error=_signal_words(number))
            case "ended", int() as code:
                return SandboxOutcome(
                    error=tr("the grader ended (exit code {code}) without a score", code=code)
                )
            case "refused", str() as why:
                return SandboxOutcome(
                    server_error=tr(
                        "the sandbox refused to run the grader, as a protection could not be "
                        "applied here ({why}); an administrator may accept running without it "
                        "by naming it in QATUNE_PYTHON_GRADER_WITHOUT",
                        why=why[:500],
                    )
                )
        return SandboxOutcome(error=tr("the grader's result was not a score"))

    def _no_report(self, ended: "Ended") -> SandboxOutcome:
        printed = ended.err.decode(errors="replace")[-2000:]
        if ended.code is not None and ended.code < 0:
            return SandboxOutcome(server_error=_signal_words(-ended.code))
        return SandboxOutcome(
            server_error=tr(
                "the sandbox ended (exit code {code}) without a result: {printed}",
                code=ended.code,
                printed=printed,
            ).strip()
        )

    def _tell(self, protections: list[str]) -> None:
        """Say once which protections held (a bounded number of distinct reports)."""
        summary = ", ".join(protections)
        if summary not in self._told and len(self._told) < PROTECTIONS_KEPT:
            self._told.add(summary)
            logger.info("Python graders run confined by: {}", summary)


@dataclass(frozen=True)
class OwnedSandbox:
    """The sandbox as one user's graders use it: their calls wait in their own line."""

    sandbox: PythonSandbox
    owner: str

    async def run(self, source: str, sample: dict[str, Any], item: Any) -> SandboxOutcome:
        return await self.sandbox.run(source, sample, item, self.owner)


@dataclass
class Ended:
    out: bytes = b""
    err: bytes = b""
    code: int | None = None
    late: bool = False
    failed_to_start: OSError | None = None


class ChildCall:
    """One child, run to its end on a thread: it is started, fed, read and killed there."""

    def __init__(self, limits: SandboxLimits, uid: int, request: dict[str, Any]) -> None:
        self.limits = limits
        self.uid = uid
        self.request = request
        self.ended: concurrent.futures.Future[Ended] = concurrent.futures.Future()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._killed = False

    def kill(self) -> None:
        with self._lock:
            self._killed = True
            if self._process is not None:
                _kill_group(self._process.pid)

    def run(self) -> None:
        try:
            ended = self._run()
        except BaseException as exc:  # the waiter must always hear back
            if not self.ended.cancelled():
                self.ended.set_exception(exc)
        else:
            if not self.ended.cancelled():  # (cancelled: its waiter is gone)
                self.ended.set_result(ended)

    def _run(self) -> Ended:
        with tempfile.TemporaryDirectory(
            prefix="qatune-grader-", ignore_cleanup_errors=True
        ) as workdir:
            root, scratch = Path(workdir, "root"), Path(workdir, "scratch")
            root.mkdir()
            scratch.mkdir(mode=0o700)
            if os.geteuid() == 0:  # the grader runs as its own user: its /tmp is its own
                os.chown(scratch, self.uid, self.uid)
            call = {
                **self.request,
                "root": str(root),
                "scratch": str(scratch),
                "uid": self.uid,
                "without": sorted(self.limits.without),
                "limits": {name: getattr(self.limits, name) for name in CHILD_LIMITS},
            }
            try:
                with self._lock:
                    if self._killed:
                        return Ended(code=-signal.SIGKILL)
                    self._process = subprocess.Popen(
                        [sys.executable, "-I", "-m", CHILD_MODULE, str(os.getpid())],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        cwd=workdir,
                        env=ENVIRONMENT,
                        start_new_session=True,
                    )
            except OSError as exc:
                return Ended(failed_to_start=exc)
            process = self._process
            try:
                deadline = time.monotonic() + self.limits.wall_seconds + GRACE_SECONDS
                out, err, late = _exchange(process, json.dumps(call).encode(), deadline)
            finally:
                _kill_group(process.pid)
                process.wait()
            return Ended(out=out, err=err, code=process.returncode, late=late)


def _exchange(
    process: "subprocess.Popen[bytes]", request: bytes, deadline: float
) -> tuple[bytes, bytes, bool]:
    """Write the request, read both streams to their end (keeping the first 64 KiB of each),
    unless the deadline comes first."""
    assert process.stdin and process.stdout and process.stderr
    kept = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    selector = selectors.DefaultSelector()
    for fd in kept:
        selector.register(fd, selectors.EVENT_READ)
    stdin = process.stdin.fileno()
    os.set_blocking(stdin, False)
    selector.register(stdin, selectors.EVENT_WRITE)
    pending = memoryview(request)
    try:
        while kept.keys() & {key.fd for key in selector.get_map().values()}:
            left = deadline - time.monotonic()
            if left <= 0:
                return (
                    bytes(kept[process.stdout.fileno()]),
                    bytes(kept[process.stderr.fileno()]),
                    True,
                )
            for key, _ in selector.select(left):
                if key.fd == stdin:
                    try:
                        pending = pending[os.write(stdin, pending[:65536]) :]
                    except BrokenPipeError:
                        pending = pending[:0]  # it ended at once: its exit says why
                    if not pending:
                        selector.unregister(stdin)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                elif len(kept[key.fd]) < OUTPUT_CAP:
                    kept[key.fd] += chunk[: OUTPUT_CAP - len(kept[key.fd])]
    finally:
        selector.close()
    return bytes(kept[process.stdout.fileno()]), bytes(kept[process.stderr.fileno()]), False


def _report(out: bytes) -> tuple[dict[str, Any], list[str]] | None:
    """The child's line, if it is one: one outcome of one kind, and its protections."""
    try:
        report = json.loads(out)
    except (ValueError, RecursionError):
        return None
    if not isinstance(report, dict) or set(report) != {"outcome", "protections"}:
        return None
    outcome, protections = report["outcome"], report["protections"]
    if not isinstance(outcome, dict) or len(outcome) != 1:
        return None
    if not isinstance(protections, list) or len(protections) > 16:
        return None
    if not all(isinstance(p, str) and len(p) <= 300 for p in protections):
        return None
    return outcome, protections


def _finite(value: float) -> bool:
    return not isinstance(value, bool) and math.isfinite(value)


def _late(seconds: float) -> SandboxOutcome:
    return SandboxOutcome(error=tr("stopped: still running after {seconds:g} s", seconds=seconds))


def _signal_words(number: int) -> str:
    try:
        known = SIGNALS.get(signal.Signals(number))
    except ValueError:
        known = None
    return tr(known) if known else tr("the grader ended by signal {n}", n=number)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # gone already
