"""The grader's view of the filesystem: a mount namespace whose root holds only what it needs.

An empty in-memory root (tmpfs), into which the Python installation and the system's
libraries are bound read-only at their own paths, four device files (null, zero, random,
urandom), the dynamic linker's cache, and the scratch directory as `/tmp`, writable but
with no set-user-ID, devices or executables. Nothing else exists there: not the service's
data, code or configuration, not `/proc`, not one UNIX socket of the host (PostgreSQL's,
Docker's, D-Bus's). The directories on the way to each bound path are the view's own
(0755), so an installation under a private home directory (pyenv under /root) reads as
well as one under /usr. Standard library only.
"""

import os
import sysconfig
from dataclasses import dataclass

from app.graders.sandbox.linux import (
    MS_BIND,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    mount,
    syscall,
    umount,
)

SYSTEM_LIBRARIES = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
SYSTEM_FILES = ("/etc/ld.so.cache",)
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
SCRATCH = "/tmp"
# statvfs's flags to the mount flags a read-only bind must keep (a user namespace may not
# drop a flag its mount was made with)
KEPT_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}


@dataclass(frozen=True)
class Layout:
    """What the view holds, decided once before it is built (Landlock's rules use it too)."""

    directories: list[str]  # bound read-only at their own paths
    files: list[str]  # likewise
    links: dict[str, str]  # symbolic links made again in the view (/lib -> usr/lib)
    devices: list[str]

    @property
    def readable(self) -> list[str]:
        return self.directories + self.files


def layout() -> Layout:
    paths = sysconfig.get_paths()
    python = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    links = {p: os.readlink(p) for p in SYSTEM_LIBRARIES if os.path.islink(p)}
    libraries = [os.path.realpath(p) for p in SYSTEM_LIBRARIES]
    return Layout(
        directories=_outermost(
            [os.path.abspath(p) for p in python + libraries if os.path.isdir(p)]
        ),
        files=[path for path in SYSTEM_FILES if os.path.isfile(path)],
        links=links,
        devices=[path for path in DEVICES if os.path.exists(path)],
    )


def enter(view: Layout, root: str, scratch: str) -> str:
    """Build the view in the mount namespace just made, then make it this process's root."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the host's mounts
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    old_umask = os.umask(0o022)
    try:
        # The scratch first: an installation under /tmp (a checkout in /tmp/x with its
        # .venv) is then bound on top of it, at its own path, instead of colliding with it,
        # on the way through an in-memory directory of the view's own (read-only once
        # built, as the root is) rather than directories in the grader's writable scratch
        os.makedirs(root + SCRATCH)
        mount(scratch, root + SCRATCH, None, MS_BIND)
        mount(None, root + SCRATCH, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        under_scratch = _under_scratch(view.readable)
        for top in under_scratch:
            os.makedirs(root + top)
            mount("tmpfs", root + top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path in view.readable:
            _bind(path, root + path, read_only=True)
        for top in under_scratch:
            mount(None, root + top, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        for path in view.devices:
            _bind(path, root + path, read_only=False)
        for path, target in view.links.items():
            if not os.path.lexists(root + path):
                os.symlink(target, root + path)
        os.mkdir(root + "/.old")
        syscall("pivot_root", root.encode(), (root + "/.old").encode())
        os.chdir("/")
        umount("/.old")
        os.rmdir("/.old")
        mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    finally:
        os.umask(old_umask)
    os.chdir(SCRATCH)
    return "filesystem view"


def _bind(source: str, target: str, read_only: bool) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "w").close()
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        kept = os.statvfs(source).f_flag
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        flags |= sum(flag for st, flag in KEPT_FLAGS.items() if kept & st)
        mount(None, target, None, flags)


def _under_scratch(paths: list[str]) -> list[str]:
    """The first directories below the scratch's mount point that hold a bound path."""
    prefix = SCRATCH + "/"
    return sorted({prefix + p[len(prefix) :].split("/")[0] for p in paths if p.startswith(prefix)})


def _outermost(paths: list[str]) -> list[str]:
    """The paths none of the others already holds (a venv's site-packages under /usr/lib)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept
