"""Run a command as an unprivileged user, as a service that is not root would run.

The interpreter may live under a directory other users cannot enter (pyenv under /root):
the command runs in a mount namespace of its own where each such directory is replaced by
an empty one with only the interpreter, the virtual environment and the checkout bound back
in, then drops to `uid`. Needs root; the host's mounts are not touched.
"""

import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from app.graders.sandbox.linux import CLONE_NEWNS, MS_BIND, MS_PRIVATE, MS_REC, mount, unshare
from tests.conftest import ROOT

NOBODY = 65534


def needed() -> list[str]:
    return sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, ROOT)})


def blocked(path: str) -> str | None:
    """The outermost directory on the way to `path` that others may not enter."""
    parts = Path(path).parts
    for depth in range(2, len(parts) + 1):
        directory = str(Path(*parts[:depth]))
        if not os.stat(directory).st_mode & stat.S_IXOTH:
            return directory
    return None


def _open_up() -> None:  # runs in the child between fork and exec
    os.umask(0o022)  # (the service under test made it 077)
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    by_wall: dict[str, list[str]] = {}
    for path in needed():
        if (wall := blocked(path)) is not None:
            by_wall.setdefault(wall, []).append(path)
    for wall, paths in by_wall.items():
        fds = [os.open(path, os.O_PATH) for path in paths]
        mount("tmpfs", wall, "tmpfs", 0, "mode=0755")
        for path, fd in zip(paths, fds, strict=True):
            os.makedirs(path, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            os.close(fd)
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def run_as_nobody(
    argv: Sequence[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    assert os.geteuid() == 0, "only root can start a process as another user"
    return subprocess.run(
        list(argv),
        env=env,
        cwd=ROOT,
        preexec_fn=_open_up,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
