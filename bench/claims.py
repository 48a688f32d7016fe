"""Job claims on SQLite and on PostgreSQL: how long a worker's claim takes, alone and with
other workers claiming at once, and what the line's turn per user costs.

    python -m bench.claims [--jobs 400] [--workers 4] [--users 4]

A real SQLite file and a real PostgreSQL server (tests/postgres.py: Debian's binaries, a
throwaway cluster on loopback, fsync off as in the tests). `--jobs` queued jobs, of
`--users` users in turn; one worker claims them all one after another, then `--workers`
threads claim a fresh set at once; each claim in its own transaction, as the worker makes
it. Two claims side by side: `claim_next_job` (the line, app/services/jobs/queue.py) and,
as the baseline, the plain oldest-first claim it replaced.
"""

import argparse
import itertools
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.storage import Storage
from app.db.base import utcnow
from app.db.models import Job, User
from app.db.session import Database
from app.jobs.status import QUEUED, RUNNING, move
from app.schemas.jobs import JobCreate
from app.services.jobs import lifecycle as jobs_service
from app.services.jobs import runs as job_runs
from tests.conftest import cpu_plan, free_port
from tests.postgres import fresh_database, postgres_server, unavailable

Claim = Callable[[Session, str], int | None]


def oldest_first(session: Session, worker: str) -> int | None:
    """The claim before the line: the oldest queued job, whoever's it is."""
    oldest = select(Job.id).where(Job.status == QUEUED).order_by(Job.id).limit(1)
    if session.get_bind().dialect.name == "postgresql":
        oldest = oldest.with_for_update(skip_locked=True)
    claim = move(0, QUEUED, RUNNING, now=utcnow(), worker_id=worker)
    values = {getattr(Job, field): value for field, value in claim.values.items()}
    return session.execute(
        update(Job)
        .where(Job.id == oldest.scalar_subquery(), Job.status == QUEUED)
        .values({Job.status: claim.status, Job.attempts: Job.attempts + 1, **values})
        .returning(Job.id)
    ).scalar_one_or_none()


def in_line(session: Session, worker: str) -> int | None:
    return job_runs.claim_next_job(session, worker_id=worker)


def queue(database: Database, settings: Settings, jobs: int, users: int) -> None:
    with database.session() as session:
        owners = []
        for number in range(users):
            name = f"bench{number}"
            user = session.query(User).filter_by(username=name).one_or_none()
            if user is None:
                user = User(username=name, password_hash="x", is_admin=False)
                session.add(user)
                session.flush()
            owners.append(user)
        request = JobCreate(qa_pairs=[{"question": "q", "answer": "a"}])
        for number in range(jobs):
            jobs_service.create_job(
                session, user=owners[number % users], storage=Storage(settings.data_dir),
                settings=settings, device_plan=cpu_plan(), request=request,
            )  # fmt: skip


def claim_all(
    database: Database, claim: Claim, worker: str, seconds: list[float], lock: threading.Lock
) -> None:
    while True:
        started = time.perf_counter()
        with database.session() as session:
            claimed = claim(session, worker)
        took = time.perf_counter() - started
        if claimed is None:
            return
        with lock:
            seconds.append(took)


def measure(name: str, url: str, scratch: Path, jobs: int, workers: int, users: int) -> None:
    database = Database(url)
    database.migrate()
    settings = Settings(data_dir=scratch)
    for (label, claim), threads in itertools.product(
        [("oldest first", oldest_first), ("a turn per user", in_line)], (1, workers)
    ):
        queue(database, settings, jobs, users)
        seconds: list[float] = []
        lock = threading.Lock()
        started = time.perf_counter()
        pool = [
            threading.Thread(target=claim_all, args=(database, claim, f"w{i}", seconds, lock))
            for i in range(threads)
        ]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        wall = time.perf_counter() - started
        ordered = sorted(seconds)
        print(
            f"| {name} | {label} | {threads} | {len(seconds)} | "
            f"{statistics.median(ordered) * 1000:.2f} | "
            f"{ordered[int(0.99 * (len(ordered) - 1))] * 1000:.2f} | {len(seconds) / wall:,.0f} |",
            flush=True,
        )
    database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--users", type=int, default=4)
    args = parser.parse_args()
    print(
        "| database | claim | workers claiming | claims | median ms | p99 ms | claims/s |\n"
        "|---|---|---:|---:|---:|---:|---:|"
    )
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        sizes = (args.jobs, args.workers, args.users)
        measure("SQLite", f"sqlite:///{scratch / 'q.db'}", scratch, *sizes)
        why = unavailable()
        if why:
            print(f"PostgreSQL not measured: {why}")
            return
        with postgres_server(free_port()) as admin_url:
            measure("PostgreSQL", fresh_database(admin_url), scratch, *sizes)


if __name__ == "__main__":
    main()
