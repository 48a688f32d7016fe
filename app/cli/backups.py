"""The data's commands: backup and restore (app/services/operations/backups.py does the work)."""

import argparse
from pathlib import Path

from app.cli.common import read_settings


def add_commands(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> None:
    """Each command's parser, with the function that runs it (`run`)."""
    backup = commands.add_parser(
        "backup", help="copy the database and artifacts to a new directory (safe while serving)"
    )
    backup.set_defaults(run=run_backup)
    backup.add_argument("target", type=Path, help="a new or empty directory")
    restore = commands.add_parser(
        "restore", help="make an empty data directory a copy of a backup, as a new instance"
    )
    restore.set_defaults(run=run_restore)
    restore.add_argument("source", type=Path, help="a directory `qatune backup` wrote")


def run_backup(args: argparse.Namespace) -> int:
    from app.services.operations.backups import back_up

    manifest = back_up(read_settings(), args.target)
    print(f"backed up to {args.target}: the {manifest.database} database", end="")
    print(f" and {manifest.files} files ({manifest.bytes / 2**20:.1f} MB)")
    if manifest.database == "postgresql":
        print("the database itself: pg_dump, as in docs/operations.md (Backup and restore)")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    from app.services.operations.backups import restore

    settings = read_settings()
    restored = restore(settings, args.source)
    print(
        f"restored {restored.manifest.files} files and the {restored.manifest.database} database "
        f"of {restored.manifest.created_at} into {settings.data_dir}; tokens issued before "
        "now are refused (sign in again)"
    )
    if restored.requeued:
        print(f"queued again, to go on from their newest checkpoint: jobs {restored.requeued}")
    return 0
