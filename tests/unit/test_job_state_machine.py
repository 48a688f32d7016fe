"""The job state machine on a real SQLite file: claims, transitions, recovery."""

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from app.core.config import Settings
from app.core.errors import ConflictError
from app.core.storage import Storage
from app.db.base import utcnow
from app.db.models import Job, User
from app.db.session import Database
from app.schemas.jobs import JobCreate
from app.services import jobs as jobs_service


@pytest.fixture
def database(tmp_path: Path) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'q.db'}")
    db.migrate()
    return db


@pytest.fixture
def setup(database: Database, tmp_path: Path) -> tuple[Settings, Storage, int]:
    settings = Settings(data_dir=tmp_path, max_job_attempts=2)
    storage = Storage(tmp_path)
    with database.session() as session:
        user = User(username="u", password_hash="x", is_admin=False)
        session.add(user)
        session.flush()
        user_id = user.id
    return settings, storage, user_id


def new_job(database: Database, setup: tuple[Settings, Storage, int]) -> int:
    settings, storage, user_id = setup
    with database.session() as session:
        user = session.get(User, user_id)
        assert user
        request = JobCreate(qa_pairs=[{"question": "q", "answer": "a"}])
        job = jobs_service.create_job(
            session, user=user, storage=storage, settings=settings, request=request
        )
        return job.id


def test_transitions_follow_the_state_machine() -> None:
    job = Job(status="queued")
    jobs_service.transition(job, "running")
    assert job.started_at is not None
    jobs_service.transition(job, "succeeded")
    assert job.finished_at is not None
    with pytest.raises(ConflictError, match="cannot become running"):
        jobs_service.transition(job, "running")
    with pytest.raises(ConflictError):
        jobs_service.transition(Job(status="queued"), "succeeded")


def test_claims_are_oldest_first_and_never_shared(database: Database, setup) -> None:  # type: ignore[no-untyped-def]
    ids = [new_job(database, setup) for _ in range(6)]
    claimed: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while True:
            with database.session() as session:
                job_id = jobs_service.claim_next_job(session, worker_id=name)
            if job_id is None:
                return
            with lock:
                claimed.append(job_id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == ids  # each job exactly once
    with database.session() as session:
        assert {j.status for j in session.query(Job)} == {"running"}
        assert all(j.attempts == 1 for j in session.query(Job))


def test_a_dead_workers_job_is_requeued_then_failed(database: Database, setup) -> None:  # type: ignore[no-untyped-def]
    settings = setup[0]
    job_id = new_job(database, setup)
    for attempt in (1, 2):
        with database.session() as session:
            assert jobs_service.claim_next_job(session, worker_id="host-a:999999") == job_id
        with database.session() as session:
            recovered = jobs_service.recover_orphaned_jobs(
                session, settings=settings, host="host-a", pid_alive=lambda pid: False
            )
            assert recovered == [job_id]
        with database.session() as session:
            job = session.get(Job, job_id)
            assert job
            expected = "queued" if attempt == 1 else "failed"
            assert job.status == expected
    assert job.error and "worker process died" in job.error


def test_live_workers_on_other_hosts_are_left_alone_until_heartbeats_stop(
    database: Database,
    setup,  # type: ignore[no-untyped-def]
) -> None:
    settings = setup[0]
    job_id = new_job(database, setup)
    with database.session() as session:
        jobs_service.claim_next_job(session, worker_id="other-host:1")
    with database.session() as session:
        assert not jobs_service.recover_orphaned_jobs(
            session, settings=settings, host="here", pid_alive=lambda pid: True
        )
    later = utcnow() + timedelta(seconds=settings.heartbeat_timeout_seconds + 1)
    with database.session() as session:
        assert jobs_service.recover_orphaned_jobs(
            session, settings=settings, host="here", pid_alive=lambda pid: True, now=later
        ) == [job_id]


def test_progress_events_update_the_job(database: Database, setup) -> None:  # type: ignore[no-untyped-def]
    job_id = new_job(database, setup)
    with database.session() as session:
        job = session.get(Job, job_id)
        assert job
        jobs_service.apply_event_data(
            job,
            {
                "kind": "progress",
                "step": 3,
                "total_steps": 10,
                "epoch": 0.3,
                "loss": 1.5,
                "eta_seconds": 7.0,
                "tokens_per_second": 900.0,
            },
        )
        assert (job.step, job.total_steps, job.metrics["loss"]) == (3, 10, 1.5)
        event = jobs_service.add_event(session, job, "INFO", "x")
        session.flush()
        assert event.seq == 2  # after "Job queued"
