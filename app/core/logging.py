"""Loguru, configured once per process before the heavy imports."""

import logging
import sys
from pathlib import Path

from loguru import logger

FORMAT = "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <7} | {process.name}:{name}:{line} - {message}"


class _InterceptHandler(logging.Handler):
    """Route the standard library's records (uvicorn, alembic) into loguru."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


def setup_logging(log_dir: Path, level: str = "INFO") -> None:
    logger.remove()
    logger.add(sys.stderr, level=level, format=FORMAT, diagnose=False)
    log_dir.mkdir(parents=True, exist_ok=True)
    logger.add(
        log_dir / "app_{time:YYYY-MM-DD}.log",
        level=level,
        format=FORMAT,
        rotation="00:00",
        retention="14 days",
        encoding="utf-8",
        diagnose=False,
        enqueue=True,  # several processes (API, training child) append to one file
    )
    logging.basicConfig(handlers=[_InterceptHandler()], level=logging.INFO, force=True)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "alembic"):
        logging.getLogger(name).handlers = [_InterceptHandler()]
        logging.getLogger(name).propagate = False
