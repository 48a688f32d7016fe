"""A real PostgreSQL server for the tests: Debian's binaries, a cluster in a temp dir run as
the unprivileged `postgres` user (initdb refuses root), on loopback, stopped at the end."""

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _binary(name: str) -> str | None:
    for directory in BIN_DIRS:
        if (directory / name).is_file():
            return str(directory / name)
    return shutil.which(name)


def unavailable() -> str | None:
    """Why no server can be started here, or None."""
    if _binary("initdb") is None or _binary("pg_ctl") is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'qatune[postgres]')"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: initdb needs an unprivileged user"
    return None


def _as_postgres(*command: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


@contextmanager
def postgres_server(port: int) -> Iterator[str]:
    """Start a throwaway cluster; yields the admin URL (user postgres, trust on loopback)."""
    root = Path(tempfile.mkdtemp(prefix="qatune-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    assert initdb and pg_ctl
    subprocess.run(
        _as_postgres(initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"),
        check=True, capture_output=True,
    )  # fmt: skip
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off"
    subprocess.run(
        _as_postgres(pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w",
                     "start"),
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_postgres(pg_ctl, "-D", str(data), "-m", "immediate", "stop"), capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(admin_url: str, *, template: str | None = None) -> str:
    """A new database on the server, empty or a copy of `template`: one per test, so tests
    never see each other."""
    import psycopg

    name = f"qatune_{uuid.uuid4().hex[:12]}"
    plain = admin_url.replace("postgresql+psycopg://", "postgresql://")
    copy = f' TEMPLATE "{template}"' if template else ""
    for _ in range(50):
        try:
            with psycopg.connect(plain, autocommit=True) as connection:
                connection.execute(f'CREATE DATABASE "{name}"{copy}')
            break
        except psycopg.OperationalError:
            time.sleep(0.1)
    return admin_url.rsplit("/", 1)[0] + f"/{name}"
