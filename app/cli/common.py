"""What every command shares: settings read once, a runtime with its device decided, and
one line on stderr with exit code 2 for settings or hardware that cannot work."""

import sys
from pathlib import Path
from typing import Any

from app.core.config import Settings, get_settings
from app.runtime import Runtime


class StartupError(Exception):
    """Settings or hardware that cannot work: one clear line, exit code 2, no traceback."""


def read_settings() -> Settings:
    from pydantic import ValidationError

    try:
        return get_settings()
    except ValidationError as exc:
        problems = "; ".join(problem(error) for error in exc.errors())
        raise StartupError(f"invalid settings: {problems}") from exc


def problem(error: Any) -> str:
    """One of pydantic's errors, as a line: where, then what."""
    where = ".".join(map(str, error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def start_runtime(*, logs: bool = True) -> Runtime:
    """The process's runtime, with its device decided now: a bad QATUNE_DEVICE stops here."""
    from app.core.logging import setup_logging
    from app.ml.device import DeviceUnavailable

    settings = read_settings()
    if logs:
        setup_logging(settings.log_dir)
    runtime = Runtime(settings)
    try:
        runtime.device_plan  # noqa: B018  (decided at start, not at the first job)
    except DeviceUnavailable as exc:
        raise StartupError(str(exc)) from exc
    return runtime


def empty_or_new(target: Path) -> bool:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        print(f"qatune: {target} exists and is not an empty directory", file=sys.stderr)
        return False
    return True
