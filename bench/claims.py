"""Job claims on SQLite and on PostgreSQL: how long a worker's claim takes, alone and with
other workers claiming at once.

    python -m bench.claims [--jobs 400] [--workers 4]

A real SQLite file and a real PostgreSQL server (tests/postgres.py: Debian's binaries, a
throwaway cluster on loopback, fsync off as in the tests). `--jobs` queued jobs; one
worker claims them all one after another, then `--workers` threads claim a fresh set at
once; each claim is `claim_next_job` in its own transaction, as the worker makes it.
"""

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from app.core.config import Settings
from app.core.storage import Storage
from app.db.models import User
from app.db.session import Database
from app.schemas.jobs import JobCreate
from app.services.jobs import lifecycle as jobs_service
from app.services.jobs import runs as job_runs
from tests.conftest import cpu_plan, free_port
from tests.postgres import fresh_database, postgres_server, unavailable


def queue(database: Database, settings: Settings, jobs: int) -> None:
    with database.session() as session:
        user = session.query(User).filter_by(username="bench").one_or_none()
        if user is None:
            user = User(username="bench", password_hash="x", is_admin=False)
            session.add(user)
            session.flush()
        request = JobCreate(qa_pairs=[{"question": "q", "answer": "a"}])
        for _ in range(jobs):
            jobs_service.create_job(
                session, user=user, storage=Storage(settings.data_dir), settings=settings,
                device_plan=cpu_plan(), request=request,
            )  # fmt: skip


def claim_all(database: Database, worker: str, seconds: list[float], lock: threading.Lock) -> None:
    while True:
        started = time.perf_counter()
        with database.session() as session:
            claimed = job_runs.claim_next_job(session, worker_id=worker)
        took = time.perf_counter() - started
        if claimed is None:
            return
        with lock:
            seconds.append(took)


def measure(name: str, url: str, scratch: Path, jobs: int, workers: int) -> None:
    database = Database(url)
    database.migrate()
    settings = Settings(data_dir=scratch)
    for threads in (1, workers):
        queue(database, settings, jobs)
        seconds: list[float] = []
        lock = threading.Lock()
        started = time.perf_counter()
        pool = [
            threading.Thread(target=claim_all, args=(database, f"w{i}", seconds, lock))
            for i in range(threads)
        ]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        wall = time.perf_counter() - started
        ordered = sorted(seconds)
        print(
            f"| {name} | {threads} | {len(seconds)} | {statistics.median(ordered) * 1000:.2f} | "
            f"{ordered[int(0.99 * (len(ordered) - 1))] * 1000:.2f} | {len(seconds) / wall:,.0f} |",
            flush=True,
        )
    database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    print(
        "| database | workers claiming | claims | median ms | p99 ms | claims/s |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        measure("SQLite", f"sqlite:///{scratch / 'q.db'}", scratch, args.jobs, args.workers)
        why = unavailable()
        if why:
            print(f"PostgreSQL not measured: {why}")
            return
        with postgres_server(free_port()) as admin_url:
            measure("PostgreSQL", fresh_database(admin_url), scratch, args.jobs, args.workers)


if __name__ == "__main__":
    main()
