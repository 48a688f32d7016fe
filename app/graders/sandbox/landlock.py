"""Landlock rules for the grader (Linux 5.13+): a second wall behind its filesystem view.

Read and execute the Python installation and the system's libraries, read the few device
and cache files the view holds, and in the scratch directory anything but devices, FIFOs
and sockets; no TCP (ABI 4+); no abstract UNIX sockets and no signals to processes outside
the sandbox (ABI 6+). Standard library only.
"""

import ctypes
import os

from app.graders.sandbox.linux import PR_SET_NO_NEW_PRIVS, fail, libc, prctl, this_arch

RULESET_VERSION, RULE_PATH_BENEATH = 1, 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
MAKE_SYM, REFER, TRUNCATE, IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
SPECIAL_FILES = MAKE_CHAR | MAKE_BLOCK | MAKE_SOCK | MAKE_FIFO


class RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The Landlock ABI this kernel offers (0: none)."""
    number = this_arch().numbers["landlock_create_ruleset"]
    return max(int(libc.syscall(number, None, 0, RULESET_VERSION)), 0)


def restrict(readable: list[str], devices: list[str], scratch: str) -> str:
    version = abi()
    if version < 1:
        raise OSError(0, "this kernel has no Landlock")
    handled = (1 << 13) - 1 | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0)
    handled |= IOCTL_DEV if version >= 5 else 0
    attr = RulesetAttr(
        handled_access_fs=handled,
        handled_access_net=BIND_TCP | CONNECT_TCP if version >= 4 else 0,
        scoped=SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0,
    )
    size = 8 if version < 4 else 16 if version < 6 else 24
    numbers = this_arch().numbers
    ruleset = libc.syscall(numbers["landlock_create_ruleset"], ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise fail("landlock_create_ruleset")
    rules = [(path, EXECUTE | READ_FILE | READ_DIR) for path in readable]
    rules += [(path, READ_FILE | WRITE_FILE) for path in devices]
    rules.append((scratch, handled & ~SPECIAL_FILES & ~IOCTL_DEV))
    try:
        for path, access in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            if not os.path.isdir(path):  # a file's rule holds only a file's rights
                access &= EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
            try:
                beneath = PathBeneathAttr(allowed_access=access & handled, parent_fd=fd)
                added = libc.syscall(
                    numbers["landlock_add_rule"], ruleset, RULE_PATH_BENEATH,
                    ctypes.byref(beneath), 0,
                )  # fmt: skip
                if added != 0:
                    raise fail(f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
        if libc.syscall(numbers["landlock_restrict_self"], ruleset, 0) != 0:
            raise fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return f"landlock v{version}"
