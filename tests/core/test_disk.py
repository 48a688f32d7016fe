"""What counts as a full disk: the OS's errno, SQLite's and libraries' words, or an I/O
error on a disk that has no room."""

import errno
import sqlite3
from pathlib import Path

import pytest

from app.core.disk import (
    FULL_BELOW_BYTES,
    MB,
    DiskLevel,
    DiskState,
    failed_for_space,
    is_no_space,
)


def raised_from(error: BaseException, cause: BaseException) -> BaseException:
    try:
        raise error from cause
    except BaseException as exc:  # noqa: BLE001
        return exc


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        sqlite3.OperationalError("database or disk is full"),
        RuntimeError(
            'IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
        ),
        raised_from(ValueError("could not save"), OSError(errno.ENOSPC, "full")),
    ],
)
def test_errors_that_say_the_disk_is_full(error: BaseException) -> None:
    assert is_no_space(error)


@pytest.mark.parametrize(
    "error",
    [OSError(errno.EACCES, "Permission denied"), sqlite3.OperationalError("database is locked")],
)
def test_errors_that_do_not(error: BaseException, tmp_path: Path) -> None:
    assert not is_no_space(error)
    assert not failed_for_space(error, tmp_path)  # and this disk has room


def test_a_vague_write_error_is_for_space_only_on_a_disk_without_room(tmp_path: Path) -> None:
    # torch's writer says only "file write failed": the disk itself decides.
    vague = RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")
    assert not failed_for_space(vague, tmp_path)
    assert not failed_for_space(ValueError("bad shape"), tmp_path)


def test_levels_and_what_they_say() -> None:
    low = 1024 * MB
    assert DiskState(2048 * MB, 4096 * MB, low).describe() == "ok"
    state = DiskState(512 * MB, 4096 * MB, low)
    assert state.level == DiskLevel.LOW
    assert state.describe() == "low: 512 MB free of 4096 MB (QATUNE_DISK_LOW_MB is 1024)"
    full = DiskState(FULL_BELOW_BYTES - 1, 4096 * MB, low)
    assert full.level == DiskLevel.FULL and full.describe().startswith("full: 32 MB free")
