"""`python` graders: user code, each call in a confined child process (sandbox_child.py).

The child starts with an empty environment in an empty temporary directory, reads its
call on stdin and confines itself before the grader's code is compiled; this side holds
the wall-clock limit, kills the child's whole process group when it is done or late, and
keeps only the first 64 KiB of what it prints. At most `concurrency` children run at once.
"""

import asyncio
import json
import os
import signal
import sys
import tempfile
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from app.core.language import deferred, tr
from app.graders import sandbox_child
from app.graders.sandbox_child import landlock_abi
from app.graders.tools import SandboxOutcome

CHILD = Path(sandbox_child.__file__)
NOBODY = 65534
OUTPUT_CAP = 64 * 1024  # bytes of the child's output kept
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
# The sandbox's own words are put in the language of the request that grades (a run's:
# the one that started it); what the grader printed is shown as it is.
SIGNALS = {
    signal.SIGXCPU: deferred("the grader used up its CPU time"),
    signal.SIGXFSZ: deferred("the grader wrote a file past its size limit"),
    signal.SIGKILL: deferred("the grader was killed"),
    signal.SIGSEGV: deferred("the grader crashed"),
}


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 10
    wall_seconds: float = 30.0
    memory_mb: int = 1024
    disk_mb: int = 16
    concurrency: int = 2


class PythonSandbox:
    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._told: set[str] = set()

    async def run(self, source: str, sample: dict[str, Any], item: Any) -> SandboxOutcome:
        loop = asyncio.get_running_loop()
        slots = self._slots.setdefault(loop, asyncio.Semaphore(self.limits.concurrency))
        async with slots:
            with tempfile.TemporaryDirectory(prefix="qatune-grader-") as workdir:
                return await self._call(workdir, source, sample, item)

    async def _call(
        self, workdir: str, source: str, sample: dict[str, Any], item: Any
    ) -> SandboxOutcome:
        if os.geteuid() == 0:  # the child runs as nobody: its directory must be its own
            os.chown(workdir, NOBODY, NOBODY)
        limits = asdict(self.limits)
        request = json.dumps({"source": source, "sample": sample, "item": item, "limits": limits})
        try:
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                str(CHILD),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env=ENVIRONMENT,
                start_new_session=True,
            )
        except OSError as exc:
            return SandboxOutcome(server_error=tr("the sandbox could not start: {exc}", exc=exc))
        try:
            out, err = await asyncio.wait_for(
                self._talk(child, request.encode()), self.limits.wall_seconds
            )
        except TimeoutError:
            return SandboxOutcome(
                error=tr(
                    "stopped: still running after {seconds:g} s", seconds=self.limits.wall_seconds
                )
            )
        finally:
            _kill_group(child.pid)
            await child.wait()
        return self._outcome(child.returncode, out, err)

    @staticmethod
    async def _talk(child: asyncio.subprocess.Process, request: bytes) -> tuple[bytes, bytes]:
        assert child.stdin and child.stdout and child.stderr
        child.stdin.write(request)
        try:
            await child.stdin.drain()
        except ConnectionError:
            pass  # it died at once: its exit says why
        child.stdin.close()
        out, err, _ = await asyncio.gather(
            _read_capped(child.stdout), _read_capped(child.stderr), child.wait()
        )
        return out, err

    def _outcome(self, code: int | None, out: bytes, err: bytes) -> SandboxOutcome:
        printed = err.decode(errors="replace")[-2000:]
        try:
            result = json.loads(out)
        except ValueError:
            result = None
        if not isinstance(result, dict):
            if code is not None and code < 0:
                known = SIGNALS.get(signal.Signals(-code))
                why = tr(known) if known else tr("the grader ended by signal {n}", n=-code)
                return SandboxOutcome(error=why)
            return SandboxOutcome(
                error=tr(
                    "the grader ended (exit code {code}) without a score: {printed}",
                    code=code,
                    printed=printed,
                ).strip()
            )
        self._tell_protections(result.get("protections", []))
        if "value" in result:
            return SandboxOutcome(value=float(result["value"]))
        return SandboxOutcome(error=str(result.get("error", tr("no score"))))

    def _tell_protections(self, held: list[str]) -> None:
        """Say once which protections the OS gave (the docs list what each depends on)."""
        summary = ", ".join(map(str, held))
        if summary not in self._told:
            self._told.add(summary)
            logger.info("Python graders run confined by: {}", summary)


async def _read_capped(stream: asyncio.StreamReader) -> bytes:
    """All of a stream (so the child never blocks on a full pipe), the first bytes kept."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < OUTPUT_CAP:
            kept += chunk[: OUTPUT_CAP - len(kept)]
    return bytes(kept)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # gone already


__all__ = ["PythonSandbox", "SandboxLimits", "landlock_abi"]
