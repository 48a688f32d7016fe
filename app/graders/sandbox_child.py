"""One python grader's call, confined: started by python_grader.py as `python -I <this file>`.

Reads `{"source", "sample", "item", "limits"}` as JSON on stdin, confines itself, runs the
grader's `grade(sample, item)` and writes `{"value"}` or `{"error"}` as JSON on the stdout
it was started with (the grader's own prints go to stderr). The standard library only:
it must not import qatune, whose files it is about to lose sight of.

Confinement, each where the OS allows it (the result says which held):
- limits: CPU seconds, address space, file size, open files, no core dumps (setrlimit);
- no network: a network namespace of its own (unshare), and Landlock's TCP rules;
- no files but the interpreter's: Landlock lets it read the Python installation and the
  system's libraries, write its empty working directory, and nothing else (the service's
  data, configuration and code included);
- no privileges: run as root, it becomes `nobody` (the process limit then holds), and
  no_new_privs stops a setuid program from giving any back.
"""

import ctypes
import json
import os
import resource
import signal
import sys
import sysconfig
import traceback

NOBODY = 65534
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
PR_SET_NO_NEW_PRIVS = 38
# Landlock (linux/landlock.h): the same syscall numbers on every architecture.
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
RULESET_VERSION, RULE_PATH_BENEATH = 1, 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
NAMESPACES = "network and process namespaces"
SYSTEM_LIBRARIES = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
SYSTEM_FILES = ("/etc/ld.so.cache", "/dev/urandom", "/dev/null")


class RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


libc = ctypes.CDLL(None, use_errno=True)


def _fail(call: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{call}: {os.strerror(errno)}")


def limit(limits: dict[str, float]) -> None:
    cpu = int(limits["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    disk = int(limits["disk_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))


def isolate() -> str:
    """A network of its own (none), and processes of its own: the grader runs as the first
    process of a new PID namespace, and when it ends the kernel ends whatever it started."""
    flags = CLONE_NEWNET | CLONE_NEWPID
    if libc.unshare(flags if os.geteuid() == 0 else flags | CLONE_NEWUSER) != 0:
        raise _fail("unshare")
    return NAMESPACES


def drop_privileges() -> str:
    if os.geteuid() != 0:
        return "unprivileged user"
    if not all(_open_to_others(path) for path in _python_paths()):
        # e.g. pyenv under /root: as nobody the interpreter could not import anything
        raise OSError(0, "user nobody: the Python installation is not readable by others")
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return "user nobody"


def _python_paths() -> set[str]:
    paths = sysconfig.get_paths()
    return {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}


def _open_to_others(path: str) -> bool:
    """Whether a user with no rights of its own can read `path`."""
    import stat

    parts = os.path.abspath(path).split(os.sep)
    for depth in range(1, len(parts) + 1):
        mode = os.stat(os.sep + os.path.join(*parts[1:depth]) if depth > 1 else os.sep).st_mode
        if not mode & stat.S_IXOTH or (depth == len(parts) and not mode & stat.S_IROTH):
            return False
    return True


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none): files from 1, TCP from 4."""
    return max(int(libc.syscall(CREATE_RULESET, None, 0, RULESET_VERSION)), 0)


def landlock(workdir: str) -> str:
    abi = landlock_abi()
    if abi < 1:
        raise _fail("landlock")
    handled_fs = (1 << 13) - 1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    handled_fs |= IOCTL_DEV if abi >= 5 else 0
    attr = RulesetAttr(
        handled_access_fs=handled_fs,
        handled_access_net=BIND_TCP | CONNECT_TCP if abi >= 4 else 0,
        scoped=SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    read_dir = EXECUTE | READ_FILE | READ_DIR
    rules = [(path, read_dir) for path in sorted(_python_paths() | set(SYSTEM_LIBRARIES))]
    rules += [
        (path, READ_FILE | WRITE_FILE if path == "/dev/null" else READ_FILE)
        for path in SYSTEM_FILES
    ]
    rules.append((workdir, handled_fs))
    for path, access in rules:
        if not os.path.exists(path):
            continue
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = PathBeneathAttr(allowed_access=access & handled_fs, parent_fd=fd)
            if libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                raise _fail(f"landlock_add_rule {path}")
        finally:
            os.close(fd)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("prctl")
    if libc.syscall(RESTRICT_SELF, ruleset, 0) != 0:
        raise _fail("landlock_restrict_self")
    os.close(ruleset)
    return f"landlock v{abi}" + (" (files and TCP)" if abi >= 4 else " (files)")


def confine(workdir: str, limits: dict[str, float]) -> list[str]:
    """The protections that held; a step the OS refuses is named with its reason."""
    held = []
    limit(limits)
    held.append("resource limits")
    for step in (isolate, drop_privileges, lambda: landlock(workdir)):
        try:
            held.append(step())
        except OSError as exc:
            held.append(f"without {exc}")
    return held


def grade(source: str, sample: object, item: object) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "grader"}
    try:
        exec(compile(source, "grader.py", "exec"), namespace)
        function = namespace.get("grade")
        if not callable(function):
            return {"error": "the source defines no function grade(sample, item)"}
        value = function(sample, item)
    except BaseException as exc:  # the grader's own fault, whatever it is
        frames = traceback.extract_tb(exc.__traceback__)
        mine = [frame for frame in frames if frame.filename == "grader.py"]
        lines = traceback.format_list(mine) + traceback.format_exception_only(type(exc), exc)
        return {"error": "".join(lines)[-4000:]}
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {"error": f"grade() returned {type(value).__name__}, not a number"}
    if value != value or value in (float("inf"), float("-inf")):
        return {"error": f"grade() returned {value}, not a finite number"}
    return {"value": float(value)}


def main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the grader's prints go to stderr
    held = confine(os.getcwd(), request["limits"])
    if NAMESPACES in held and (pid := os.fork()) != 0:  # the grader is the namespace's first
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            os.kill(os.getpid(), -code)  # ended by a signal: say so the same way
        os._exit(code)

    def report(outcome: dict[str, object]) -> None:
        result.write(json.dumps({**outcome, "protections": held}))
        result.flush()

    def out_of_time(*_: object) -> None:  # SIGXCPU: the soft CPU limit; SIGKILL follows
        report({"error": f"stopped: used up its {request['limits']['cpu_seconds']} s of CPU"})
        os._exit(0)

    signal.signal(signal.SIGXCPU, out_of_time)
    report(grade(request["source"], request["sample"], request["item"]))


if __name__ == "__main__":
    main()
