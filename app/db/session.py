"""Engine, sessions and migrations: SQLite (the default, with its pragmas on every
connection) or PostgreSQL through psycopg 3 (`postgresql+psycopg://…`), pooled."""

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.errors import NUL_REFUSED, ValidationFailed
from app.core.language import tr

ALEMBIC_DIR = Path(__file__).resolve().parents[2] / "alembic"
UNDO = "qatune.undo"  # session.info key: what to take back if the unit of work fails


def undo_unless_committed(session: Session, undo: Callable[[], None]) -> None:
    """`undo` runs if this unit of work rolls back: the files written for rows that never
    landed (a full disk refusing the write, a conflict) go with them, nothing is left half-made."""
    session.info.setdefault(UNDO, []).append(undo)


def _sqlite_pragmas(busy_timeout_ms: int) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")  # readers never wait for the worker's writes
        cursor.execute("PRAGMA synchronous=NORMAL")  # safe with WAL, far fewer fsyncs
        cursor.execute("PRAGMA foreign_keys=ON")  # SQLite ignores FOREIGN KEY clauses otherwise
        cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")  # wait for a writer first
        cursor.close()

    return on_connect


def is_busy(exc: BaseException) -> bool:
    """SQLite's busy timeout ran out: other writers held the database all that time."""
    return isinstance(exc, OperationalError) and "locked" in str(exc.orig)


def _refuse_nul(
    _connection: Any, _cursor: Any, _statement: str, parameters: Any, _context: Any, _many: bool
) -> None:
    """PostgreSQL cannot hold a NUL character in text (a 500 there, kept on SQLite): a
    value with one is refused alike on both, whichever request brought it."""
    # One row's values, or (executemany, and an INSERT of many rows in one statement)
    # rows of them or all in one flat sequence: every string at either depth is checked.
    for value in _values(parameters):
        texts = _values(value) if isinstance(value, dict | tuple | list) else [value]
        if any(isinstance(text, str) and "\x00" in text for text in texts):
            raise ValidationFailed(tr(NUL_REFUSED))


def _values(parameters: Any) -> Iterable[Any]:
    return parameters.values() if isinstance(parameters, dict) else parameters or ()


class Database:
    """One per process: owns the engine and hands out short-lived sessions."""

    def __init__(self, url: str, *, busy_timeout_s: float = 10.0) -> None:
        self.url = url
        is_sqlite = url.startswith("sqlite")
        if is_sqlite and ":///" in url and not url.endswith(":memory:"):
            Path(url.split(":///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(
            url,
            connect_args={"check_same_thread": False} if is_sqlite else {},
            pool_size=10,
            # A request holds its connection from its user's lookup to its response, and a
            # flood of requests can hold more than any fixed pool: SQLite's connections are
            # file handles, so never make one wait for another (-1: no limit).
            max_overflow=-1 if is_sqlite else 20,
            pool_timeout=busy_timeout_s,  # then a 503 (api/errors.py), as for a busy writer
            # A server's connections can be closed under the pool (a restart, an idle
            # timeout): check each before use rather than fail the request.
            pool_pre_ping=not is_sqlite,
        )
        if is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas(round(busy_timeout_s * 1000)))
        event.listen(self.engine, "before_cursor_execute", _refuse_nul)
        self.sessionmaker = sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> "Database":
        return cls(settings.sqlalchemy_url, busy_timeout_s=settings.database_busy_seconds)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: commit on success, roll back on any error."""
        with self.sessionmaker() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                for undo in reversed(session.info.get(UNDO, [])):
                    undo()
                raise
            finally:
                session.info.pop(UNDO, None)

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision."""
        from alembic.config import Config

        from alembic import command

        config = Config()
        config.set_main_option("script_location", str(ALEMBIC_DIR))
        config.attributes["connection_url"] = self.url
        command.upgrade(config, "head")

    def dispose(self) -> None:
        self.engine.dispose()
