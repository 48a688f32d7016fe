"""The protections a grader's call runs under, applied in order; the sandbox fails closed.

Each step either holds or raises `Refused` naming itself and the OS's reason, and then no
user code runs, unless an administrator accepted running without that step by its name
(QATUNE_PYTHON_GRADER_WITHOUT): then the report says "without <step>: <reason>".

- namespaces: mount, PID, network, UTS, IPC and cgroup namespaces of its own (and a user
  namespace when the service is not root): no network, no host name to change, no System
  V shared memory or semaphores that outlive it, nothing it starts that outlives it;
- filesystem: the view of view.py (Python and the system's libraries, read-only; an empty
  scratch directory as /tmp; nothing else);
- landlock: the same view again, enforced by the kernel's Landlock (no device, FIFO or
  socket file even in /tmp, no TCP, no abstract UNIX sockets, no signals out);
- privileges: no capabilities (bounding and ambient sets emptied, root's locked out of
  exec), as root a user ID of the sandbox's own, and no_new_privs;
- seccomp: seccomp.py's filter.
Resource limits (CPU, memory, file size, open files, processes, real-time priority, locked
memory, core dumps) and the parent-death signal always hold. Standard library only.
"""

import os
import resource
import signal
from collections.abc import Callable
from dataclasses import dataclass

from app.graders.sandbox import landlock, seccomp, view
from app.graders.sandbox.linux import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    LOCKED_SECUREBITS,
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    PR_SET_SECUREBITS,
    capabilities,
    drop_capabilities,
    libc,
    prctl,
    this_arch,
    unshare,
)

STEPS = ("namespaces", "filesystem", "landlock", "privileges", "seccomp")


class Refused(Exception):
    """A protection could not be applied, and the service does not accept running without it."""


@dataclass(frozen=True)
class Call:
    """What the child needs to confine itself, from the service's request."""

    owner: int  # the service's process: if it dies, so does the sandbox
    root: str  # an empty directory to build the view on
    scratch: str  # the grader's working directory (its /tmp)
    uid: int  # as root: the user ID the grader runs as
    without: frozenset[str]  # steps the administrator accepts missing
    cpu_seconds: int
    memory_mb: int
    disk_mb: int
    processes: int


def confine(call: Call) -> list[str]:
    """Apply every step; the report: what held, and what is missing by consent and why."""
    layout = view.layout()
    privileged = os.geteuid() == 0
    missing: set[str] = set()
    scratch = lambda: call.scratch if "filesystem" in missing else view.SCRATCH  # noqa: E731
    steps: list[tuple[str, Callable[[], str]]] = [
        ("namespaces", lambda: _namespaces(privileged)),
        ("filesystem", lambda: view.enter(layout, call.root, call.scratch)),
        # Landlock's rules open the paths they name, which the sandbox's user may not reach
        # without the view: they come before the user changes.
        ("landlock", lambda: landlock.restrict(layout.readable, layout.devices, scratch())),
        ("privileges", lambda: _drop_privileges(privileged, call.uid)),
        ("seccomp", lambda: seccomp.install(this_arch())),
    ]
    held: list[str] = []
    for name, step in steps:
        try:
            if name == "filesystem" and "namespaces" in missing:
                raise OSError(0, "it needs the namespaces, which are missing")
            held.append(step())
        except OSError as exc:
            if name not in call.without:
                raise Refused(f"{name}: {exc.strerror or exc}") from exc
            missing.add(name)
            held.append(f"without {name}: {exc.strerror or exc}")
    held.append(_limit(call))
    die_with(call.owner)  # again: changing credentials cleared it
    return held


def die_with(owner: int) -> None:
    """Be killed when the process that started this one ends (even by SIGKILL)."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")
    if os.getppid() != owner:  # it ended before the signal was armed
        os._exit(1)


def _namespaces(privileged: bool) -> str:
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC
    flags |= CLONE_NEWCGROUP
    if privileged:
        unshare(flags)
    else:  # a user namespace in which this user is root, for the mounts of the view
        uid, gid = os.geteuid(), os.getegid()
        unshare(flags | CLONE_NEWUSER)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    libc.sethostname(b"sandbox", 7)  # the host's name is not the grader's business
    return "namespaces"


def _drop_privileges(privileged: bool, uid: int) -> str:
    if capabilities()[1]:  # what it holds (root, or root of its user namespace) goes for good
        prctl(PR_SET_SECUREBITS, LOCKED_SECUREBITS, "securebits")
        for capability in range(64):
            if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                break  # past the last capability this kernel knows
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "ambient capabilities")
    if privileged:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    drop_capabilities()
    if capabilities() != (0, 0, 0):
        raise OSError(0, "capabilities remain after they were dropped")
    if privileged and 0 in os.getresuid():
        raise OSError(0, "still root after changing user")
    prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
    return f"no capabilities, user {uid}" if privileged else "no capabilities"


def _limit(call: Call) -> str:
    megabyte = 1024 * 1024
    limits = {
        resource.RLIMIT_CPU: (call.cpu_seconds, call.cpu_seconds + 1),  # SIGXCPU, then SIGKILL
        resource.RLIMIT_AS: (call.memory_mb * megabyte,) * 2,
        resource.RLIMIT_FSIZE: (call.disk_mb * megabyte,) * 2,
        resource.RLIMIT_NOFILE: (64, 64),
        resource.RLIMIT_NPROC: (call.processes, call.processes),  # threads count too
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_MEMLOCK: (0, 0),
        resource.RLIMIT_RTPRIO: (0, 0),
        resource.RLIMIT_MSGQUEUE: (0, 0),
    }
    for kind, (soft, hard) in limits.items():
        resource.setrlimit(kind, (soft, hard))
    return "resource limits"


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)
