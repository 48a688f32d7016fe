"""The disk that holds the data directory: how much room it has, and whether an error was
for want of room.

A full disk is a state of the service, not a crash: writes that fail for space become a
507 (api/errors.py), a training run that cannot save becomes a job paused until there is
room again (services/jobs/runs.py), and /ready, /metrics and the log say so before it
happens (`DiskState`).
"""

import errno
import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from app.core.language import Sentence, said

MB = 1024 * 1024
# Below this nothing can be relied on: SQLite's journal, a checkpoint, a log line.
FULL_BELOW_BYTES = 32 * MB
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# How libraries that wrap the OS error word it (torch's writer says only "file write
# failed": `failed_for_space` then asks the disk itself).
NO_SPACE_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")


class DiskLevel(StrEnum):
    OK = "ok"
    LOW = "low"  # under the operator's threshold: a warning
    FULL = "full"  # writes fail


@dataclass(frozen=True)
class DiskState:
    free_bytes: int
    total_bytes: int
    low_below_bytes: int  # QATUNE_DISK_LOW_MB

    @property
    def level(self) -> DiskLevel:
        if self.free_bytes < FULL_BELOW_BYTES:
            return DiskLevel.FULL
        return DiskLevel.LOW if self.free_bytes < self.low_below_bytes else DiskLevel.OK

    def describe(self) -> str:
        """For /ready and the log: "ok", or how little room there is and what to do."""
        free = f"{self.free_bytes / MB:.0f} MB free of {self.total_bytes / MB:.0f} MB"
        if self.level == DiskLevel.FULL:
            return f"full: {free}; free space on the data directory's disk"
        if self.level == DiskLevel.LOW:
            return f"low: {free} (QATUNE_DISK_LOW_MB is {self.low_below_bytes // MB})"
        return "ok"


def disk_state(path: Path, *, low_below_mb: int) -> DiskState:
    usage = shutil.disk_usage(path)
    return DiskState(
        free_bytes=usage.free, total_bytes=usage.total, low_below_bytes=low_below_mb * MB
    )


def _errors_in(exc: BaseException) -> list[BaseException]:
    """The error and what it was raised from or during, once each."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def is_no_space(exc: BaseException) -> bool:
    """The error says it was for want of room (the OS's errno, SQLite's, a library's words)."""
    for error in _errors_in(exc):
        if isinstance(error, OSError) and error.errno in NO_SPACE_ERRNOS:
            return True
        if any(words in str(error).lower() for words in NO_SPACE_WORDS):
            return True
    return False


def failed_for_space(exc: BaseException, path: Path) -> bool:
    """A write under `path` failed because its disk is full: the error says so, or it is an
    I/O error and the disk has (next to) no room left."""
    if is_no_space(exc):
        return True
    if not any(isinstance(error, OSError | RuntimeError) for error in _errors_in(exc)):
        return False
    try:
        return shutil.disk_usage(path).free < FULL_BELOW_BYTES
    except OSError:
        return False


def disk_full(path: Path) -> Sentence:
    """What to tell a user: the disk is full, and how full (read in the reader's language)."""
    try:
        free = shutil.disk_usage(path).free / MB
    except OSError:
        return said("the disk holding qatune's data is full")
    return said("the disk holding qatune's data is full ({free:.0f} MB free)", free=free)
