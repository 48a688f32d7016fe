"""A seccomp filter for the grader: the system calls no grader needs, refused.

What the other protections already stop is refused here as well, so that one missing layer
leaves no hole: no sockets (socketpair stays: asyncio's self-pipe is one), no device, FIFO or
socket files (mknod), no namespaces (unshare, setns, clone with a CLONE_NEW* flag), no
mounts, no tracing of other processes, no io_uring (its requests would bypass this filter),
no kernel keyrings (they are not namespaced), no BPF, perf or userfaultfd, no modules,
hostnames or reboots. A call from another ABI (i386 on x86_64) kills the process. Standard
library only.
"""

import ctypes
import errno

from app.graders.sandbox.linux import (
    CLONE_NEWTIME,
    NAMESPACE_FLAGS,
    PR_SET_SECCOMP,
    SECCOMP_MODE_FILTER,
    Arch,
    check,
    libc,
)

REFUSED = (
    "socket", "mknod", "mknodat", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "pidfd_getfd", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "open_tree", "open_tree_attr", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl",
    "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "fanotify_init",
    "open_by_handle_at", "name_to_handle_at", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl",
    "quotactl_fd", "sethostname", "setdomainname", "syslog", "personality", "vhangup",
    "lookup_dcookie", "iopl", "ioperm", "uselib", "_sysctl", "nfsservctl",
)  # fmt: skip

# classic BPF, as seccomp reads it: struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}
LOAD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ, JGE, JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_JEQ/JGE/JSET | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K
NR, ARCH, ARG0_LOW = 0, 4, 16
KILL_PROCESS, ALLOW = 0x80000000, 0x7FFF0000
ERRNO = 0x00050000
X32_BIT = 0x40000000


class Instruction(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Instruction))]


def program(arch: Arch) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump if true, jump if false, value) rows; jumps go forward."""
    refused = [arch.numbers[name] for name in REFUSED if name in arch.numbers]
    head: list[tuple[int, int, int, int]] = [
        (LOAD, 0, 0, ARCH),
        (JEQ, 1, 0, arch.audit),
        (RETURN, 0, 0, KILL_PROCESS),
        (LOAD, 0, 0, NR),
    ]
    # Counted from the row after each test: [refused..., clone3, clone, allow,
    # clone's flags: load, test, allow], then deny (EPERM) and no-such-call (ENOSYS).
    tests = ([X32_BIT] if arch.x32 else []) + refused
    rows_after = len(tests) + 2 + 1 + 3
    body = []
    for index, number in enumerate(tests):
        to_deny = rows_after - index - 1
        body.append((JGE if arch.x32 and index == 0 else JEQ, to_deny, 0, number))
    body += [
        (JEQ, 6, 0, arch.numbers["clone3"]),  # -> ENOSYS: glibc falls back to clone
        (JEQ, 1, 0, arch.numbers["clone"]),
        (RETURN, 0, 0, ALLOW),
        (LOAD, 0, 0, ARG0_LOW),  # clone(flags, ...) on both architectures
        (JSET, 1, 0, NAMESPACE_FLAGS & ~CLONE_NEWTIME),  # 0x80 is the exit signal here
        (RETURN, 0, 0, ALLOW),
        (RETURN, 0, 0, ERRNO | errno.EPERM),
        (RETURN, 0, 0, ERRNO | errno.ENOSYS),
    ]
    return head + body


def install(arch: Arch) -> str:
    rows = program(arch)
    instructions = (Instruction * len(rows))(*(Instruction(*row) for row in rows))
    filter_ = Program(len(rows), instructions)
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(filter_), 0, 0), "seccomp")
    return "seccomp"
