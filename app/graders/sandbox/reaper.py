"""Sandboxes whose service is gone, ended.

A sandbox's child arms a parent-death signal before it reads its call, so it dies with the
process that started it, even one killed with SIGKILL. This is the second line: any process
still running the child module whose owner (the last argument, the service's process ID) no
longer exists is killed with its process group. The service reaps when it starts and then
at most once a minute, before a call.
"""

import os
import signal
import time
from pathlib import Path

MODULE = "app.graders.sandbox.child"
EVERY_SECONDS = 60.0
_last = 0.0


def orphans() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue  # gone, or not ours to read
        if len(argv) >= 2 and argv[-2] == MODULE.encode() and argv[-1].isdigit():
            if not _alive(int(argv[-1])):
                found.append(int(entry.name))
    return found


def reap() -> list[int]:
    global _last
    _last = time.monotonic()
    killed = []
    for pid in orphans():
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


def reap_now_and_then() -> None:
    if time.monotonic() - _last >= EVERY_SECONDS:
        reap()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
