"""Backup and restore: the database and every artifact, consistent while jobs run.

A backup is a directory: the SQLite database as of one moment (SQLite's online backup,
taken while the service writes), then the data directory's files (datasets, jobs'
pairs, adapters, checkpoints, exports), and a manifest. The database goes first, so every
file it names is there (checkpoints and exports written after it are harmless extras).
Left out: the model cache (downloaded again), the logs, the secrets. It is written beside
its target and renamed into place when whole: an interrupted backup leaves no backup.

A restore makes a new instance: a new signing key, and every token issued before it
refused (passwords and API keys stay); the jobs that were running are queued again once,
to go on from their newest checkpoint. PostgreSQL databases are backed up with pg_dump
(docs/operations.md); a backup of one holds the files only.
"""

import json
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from sqlalchemy import update

from app.core.config import Settings
from app.core.errors import ValidationFailed
from app.core.language import tr
from app.core.security import load_or_create_secret
from app.db.base import utcnow
from app.db.models import User
from app.db.session import Database
from app.services.jobs import runs as job_runs

MANIFEST = "qatune-backup.json"
FORMAT = 1
FILES = "data"  # the data directory's files, under the backup
DATABASE = "qatune.db"
LEFT_OUT = frozenset({"models", "logs", "secret_key", "admin_password"})


@dataclass(frozen=True)
class Manifest:
    format: int
    created_at: str
    database: Literal["sqlite", "postgresql"]
    files: int
    bytes: int


@dataclass(frozen=True)
class Restored:
    manifest: Manifest
    requeued: list[int]


def back_up(settings: Settings, target: Path) -> Manifest:
    """Write a backup of this instance to `target` (a new or empty directory)."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValidationFailed(
            tr("{target} exists and is not empty: choose a new directory", target=target)
        )
    if target.resolve().is_relative_to(settings.data_dir.resolve()):
        raise ValidationFailed(
            tr("{target} is inside the data directory: choose one outside it", target=target)
        )
    staging = target.parent / f".{target.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True, mode=0o700)
    try:
        database_file = _sqlite_file(settings)
        skip: set[str] = set()
        if database_file is not None:
            _snapshot(database_file, staging / DATABASE)
            skip = {database_file.name, f"{database_file.name}-wal", f"{database_file.name}-shm"}
        files, size = _copy_tree(settings.data_dir, staging / FILES, skip)
        manifest = Manifest(
            format=FORMAT,
            created_at=utcnow().isoformat(),
            database="sqlite" if database_file else "postgresql",
            files=files,
            bytes=size,
        )
        (staging / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2) + "\n")
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def restore(settings: Settings, source: Path) -> Restored:
    """Make this (empty) instance a copy of the backup in `source`, as a new instance."""
    manifest = read_manifest(source)
    database_file = _sqlite_file(settings)
    if manifest.database == "sqlite" and database_file is None:
        raise ValidationFailed(
            tr(
                "The backup holds a SQLite database and QATUNE_DATABASE_URL names PostgreSQL: "
                "restore into a SQLite instance"
            )
        )
    data_dir = settings.data_dir
    in_use = (
        [p.name for p in data_dir.iterdir() if p.name not in LEFT_OUT] if data_dir.exists() else []
    )
    if in_use:
        raise ValidationFailed(
            tr(
                "{data_dir} is in use ({files}): restore into an empty data directory "
                "(QATUNE_DATA_DIR), with the service stopped",
                data_dir=data_dir,
                files=", ".join(sorted(in_use)[:5]),
            )
        )
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    _copy_tree(source / FILES, data_dir, set())
    if database_file is not None and (source / DATABASE).exists():
        _snapshot(source / DATABASE, database_file)
    secret = data_dir / "secret_key"
    secret.unlink(missing_ok=True)
    load_or_create_secret(secret)  # a new key: the old instance's tokens do not verify
    database = Database.from_settings(settings)
    try:
        database.migrate()  # a backup of an older version comes up to this one's schema
        with database.session() as session:
            # Also with QATUNE_SECRET_KEY set (the same key as before): earlier tokens go.
            session.execute(update(User).values(password_changed_at=utcnow()))
            requeued = job_runs.requeue_restored(session, settings=settings)
    finally:
        database.dispose()
    return Restored(manifest, requeued)


def read_manifest(source: Path) -> Manifest:
    try:
        fields = json.loads((source / MANIFEST).read_text())
        manifest = Manifest(**fields)
    except (OSError, ValueError, TypeError) as exc:
        raise ValidationFailed(
            tr(
                "{source} is not a qatune backup (no readable {manifest})",
                source=source,
                manifest=MANIFEST,
            )
        ) from exc
    if manifest.format > FORMAT:
        raise ValidationFailed(
            tr(
                "{source} was written by a newer qatune (format {format})",
                source=source,
                format=manifest.format,
            )
        )
    return manifest


def _sqlite_file(settings: Settings) -> Path | None:
    url = settings.sqlalchemy_url
    return Path(url.split(":///", 1)[1]) if url.startswith("sqlite") and ":///" in url else None


def _snapshot(source: Path, target: Path) -> None:
    """SQLite's online backup: one consistent moment, however busy the source is."""
    target.parent.mkdir(parents=True, exist_ok=True)
    reader, writer = sqlite3.connect(source, timeout=30), sqlite3.connect(target)
    try:
        reader.backup(writer, pages=1024)  # in steps: the service's writers are not held up
    finally:
        reader.close()
        writer.close()
    target.chmod(0o600)


def _copy_tree(source: Path, target: Path, skip_top: set[str]) -> tuple[int, int]:
    """Copy the files under `source`, not the cache, logs and secrets; files that vanish
    meanwhile (a job deleted during the backup) are skipped. Returns (files, bytes)."""
    files = size = 0
    for path in _walk(source, skip_top | LEFT_OUT):
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            shutil.copy2(path, destination)
        except FileNotFoundError:
            continue
        files += 1
        size += destination.stat().st_size
    return files, size


def _walk(directory: Path, skip_top: set[str]) -> Iterator[Path]:
    for entry in sorted(directory.iterdir()) if directory.exists() else []:
        if entry.name in skip_top or entry.name.startswith("."):  # a write still staging
            continue
        if entry.is_symlink():
            continue
        if entry.is_dir():
            yield from _walk(entry, set())
        elif entry.is_file():
            yield entry
