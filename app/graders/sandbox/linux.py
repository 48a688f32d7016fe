"""The Linux calls the sandbox's child makes through libc: constants and thin wrappers.

Standard library only (the child imports it before it confines itself). Every wrapper
raises OSError naming the call, so a protection that cannot be applied says which and why.
"""

import ctypes
import os
import platform

libc = ctypes.CDLL(None, use_errno=True)

# unshare(2) flags
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
NAMESPACE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
    | CLONE_NEWTIME
)

# mount(2) flags
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 0x20, 0x400, 0x800, 0x1000
MS_REC, MS_PRIVATE, MS_RELATIME = 0x4000, 0x40000, 0x200000
MNT_DETACH = 0x2

# prctl(2) options
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# securebits: root gets no capabilities from exec, and none of it can be changed back
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1 << 0, 1 << 1
SECBIT_KEEP_CAPS_LOCKED = 1 << 5
SECBIT_NO_CAP_AMBIENT_RAISE, SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 6, 1 << 7
LOCKED_SECUREBITS = (
    SECBIT_NOROOT
    | SECBIT_NOROOT_LOCKED
    | SECBIT_KEEP_CAPS_LOCKED
    | SECBIT_NO_CAP_AMBIENT_RAISE
    | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
)
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class Arch:
    """What differs between the architectures the sandbox knows: seccomp's audit
    identifier and the numbers of the calls it filters or makes itself."""

    def __init__(self, audit: int, numbers: dict[str, int], x32: bool = False) -> None:
        self.audit = audit
        self.numbers = numbers
        self.x32 = x32  # x86_64's second ABI, whose numbers carry bit 30


# Read from the kernel's headers: asm/unistd_64.h (x86_64), asm-generic/unistd.h (aarch64).
# A call both give the same number (the newer ones, from 424 on):
_SHARED = {
    "clone3": 435, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442, "quotactl_fd": 443,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
    "open_tree_attr": 467,
}  # fmt: skip
# The others: (x86_64, aarch64), None where aarch64 never had the call.
_NUMBERED: dict[str, tuple[int, int | None]] = {
    "socket": (41, 198), "clone": (56, 220), "ptrace": (101, 117), "syslog": (103, 116),
    "mknod": (133, None), "uselib": (134, None), "personality": (135, 92),
    "vhangup": (153, 58), "pivot_root": (155, 41), "_sysctl": (156, None), "chroot": (161, 51),
    "acct": (163, 89), "mount": (165, 40), "umount2": (166, 39), "swapon": (167, 224),
    "swapoff": (168, 225), "reboot": (169, 142), "sethostname": (170, 161),
    "setdomainname": (171, 162), "iopl": (172, None), "ioperm": (173, None),
    "init_module": (175, 105), "delete_module": (176, 106), "quotactl": (179, 60),
    "nfsservctl": (180, 42), "lookup_dcookie": (212, 18), "kexec_load": (246, 104),
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "mknodat": (259, 33), "unshare": (272, 97), "perf_event_open": (298, 241),
    "fanotify_init": (300, 262), "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265), "setns": (308, 268), "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271), "kcmp": (312, 272), "finit_module": (313, 273),
    "kexec_file_load": (320, 294), "bpf": (321, 280), "userfaultfd": (323, 282),
}  # fmt: skip


def _numbers(column: int) -> dict[str, int]:
    own = {name: pair[column] for name, pair in _NUMBERED.items()}
    return _SHARED | {name: number for name, number in own.items() if number is not None}


X86_64 = Arch(0xC000003E, _numbers(0), x32=True)
AARCH64 = Arch(0xC00000B7, _numbers(1))
ARCHES = {"x86_64": X86_64, "aarch64": AARCH64}


def this_arch() -> Arch:
    machine = platform.machine()
    if machine not in ARCHES:
        raise OSError(0, f"no system call table for the {machine} architecture")
    return ARCHES[machine]


def fail(call: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{call}: {os.strerror(errno)}")


def check(result: int, call: str) -> int:
    if result < 0:
        raise fail(call)
    return result


def syscall(name: str, *args: object) -> int:
    return check(libc.syscall(this_arch().numbers[name], *args), name)


def prctl(option: int, arg: int = 0, call: str = "prctl") -> int:
    return check(libc.prctl(option, arg, 0, 0, 0), call)


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    result = libc.mount(_bytes(source), target.encode(), _bytes(fstype), flags, data.encode())
    check(result, f"mount {target}")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def umount(target: str) -> None:
    check(libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def capabilities() -> tuple[int, int, int]:
    """This process's effective, permitted and inheritable sets (capget)."""
    header = CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (CapData * 2)()
    check(libc.capget(ctypes.byref(header), data), "capget")
    low, high = data[0], data[1]
    return (
        high.effective << 32 | low.effective,
        high.permitted << 32 | low.permitted,
        high.inheritable << 32 | low.inheritable,
    )


def drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets (capset)."""
    header = CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (CapData * 2)()
    check(libc.capset(ctypes.byref(header), data), "capset")
