"""The job state machine on a real SQLite file and a real PostgreSQL server: claims,
outcomes, recovery, events."""

import json
import os
import random
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.api.openai.fine_tuning import to_job
from app.core.config import Settings
from app.core.errors import ConflictError
from app.core.language import said, verbatim
from app.core.storage import Storage
from app.db.base import utcnow
from app.db.models import Job, User
from app.db.session import Database
from app.jobs.metrics import JobMetrics
from app.jobs.outcomes import (
    Cancelled,
    Failed,
    Interrupted,
    Outcome,
    OutOfSpace,
    Paused,
    Succeeded,
)
from app.jobs.status import JobAction, actions
from app.ml.events import Checkpointed, Learned, Progress, TrainingEvent
from app.ml.hyperparameters import ResolvedHyperparameters
from app.ml.memory import MemorySnapshot
from app.ml.training.metrics import TrainingMetrics
from app.schemas.jobs import JobCreate
from app.services.jobs import estimates, queue, trained_models
from app.services.jobs import lifecycle as jobs_service
from app.services.jobs import runs as job_runs
from tests.conftest import cpu_plan, prepare_data_dir


@pytest.fixture
def database(tmp_path: Path, database_url: str | None) -> Database:
    db = Database(database_url or f"sqlite:///{tmp_path / 'q.db'}")
    db.migrate()
    return db


@pytest.fixture
def settings(tmp_path: Path, model_cache: Path) -> Settings:
    prepare_data_dir(tmp_path, model_cache)
    return Settings(data_dir=tmp_path, max_job_attempts=2)


@pytest.fixture
def user_id(database: Database) -> int:
    with database.session() as session:
        user = User(username="u", password_hash="x", is_admin=False)
        session.add(user)
        session.flush()
        return user.id


def create_job(session: Session, settings: Settings, user_id: int) -> Job:
    user = session.get(User, user_id)
    assert user
    return jobs_service.create_job(
        session,
        user=user,
        storage=Storage(settings.data_dir),
        settings=settings,
        device_plan=cpu_plan(),
        request=JobCreate(qa_pairs=[{"question": "q", "answer": "a"}]),
    )


def new_job(database: Database, settings: Settings, user_id: int) -> int:
    with database.session() as session:
        return create_job(session, settings, user_id).id


def status(database: Database, job_id: int) -> Job:
    with database.session() as session:
        job = session.get(Job, job_id)
        assert job
        return job


def settle(database: Database, job_id: int, outcome: Outcome, stopping: bool = False) -> Job:
    with database.session() as session:
        job = job_runs.settle(
            session, job_id=job_id, outcome=outcome, max_failures=2, service_stopping=stopping
        )
        assert job
        return job


def claim(database: Database, worker: str = "host:1") -> int | None:
    with database.session() as session:
        return job_runs.claim_next_job(session, worker_id=worker)


METRICS = TrainingMetrics(3, 300, 280, 1.0, 300.0, 280.0, 0.5, 0.7, 1.0, "cpu", "bf16")
RESOLVED = ResolvedHyperparameters(
    1, None, 1e-3, 8, None, 8, 16, 0.0, "all-linear", 64, 0.0, 42, "auto", "auto"
)


def test_claims_are_oldest_first_and_never_shared(
    database: Database, settings: Settings, user_id: int
) -> None:
    ids = [new_job(database, settings, user_id) for _ in range(6)]
    claimed: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while (job_id := claim(database, name)) is not None:
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


def another_user(database: Database, name: str) -> int:
    with database.session() as session:
        user = User(username=name, password_hash="x", is_admin=False)
        session.add(user)
        session.flush()
        return user.id


def line(database: Database) -> list[int]:
    with database.session() as session:
        return list(session.scalars(queue.line()))


def test_each_user_takes_a_turn_in_rotation(
    database: Database, settings: Settings, user_id: int
) -> None:
    """Oldest first for one user; across users, one job each in turn, so one user's many
    jobs do not hold another's back."""
    other = another_user(database, "v")
    mine = [new_job(database, settings, user_id) for _ in range(3)]
    theirs = [new_job(database, settings, other) for _ in range(2)]
    last = new_job(database, settings, user_id)
    expected = [mine[0], theirs[0], mine[1], theirs[1], mine[2], last]
    assert line(database) == expected
    assert [claim(database) for _ in expected] == expected
    assert claim(database) is None


def test_the_line_a_queued_job_is_shown_in_is_the_order_claims_take(
    database: Database, settings: Settings, user_id: int
) -> None:
    """Places are what the claims will do: for jobs made and claimed in any interleaving by
    three users, the line read at any moment is the order the next claims take them in."""
    users = [user_id, another_user(database, "v"), another_user(database, "w")]
    chance = random.Random(7)
    for _ in range(30):
        if chance.random() < 0.65:
            new_job(database, settings, chance.choice(users))
        else:
            claim(database)
        if chance.random() < 0.2:
            expected = line(database)
            assert [claim(database) for _ in expected] == expected


def test_a_queued_job_starts_when_a_slot_frees_for_it() -> None:
    """Each queued job takes the first slot to free, in the line's order (one slot while
    none runs); a time not known makes every later one not known."""
    assert queue.start_times([], [10.0, 20.0, None, 5.0]) == [0.0, 10.0, 30.0, None]
    assert queue.start_times([50.0, 20.0], [10.0, 10.0, 10.0]) == [20.0, 30.0, 40.0]
    assert queue.start_times([None], [10.0]) == [None]
    # a running job's time left: its loop's ETA, or what its estimate leaves, if longer
    assert queue.time_left(30.0, 100.0, elapsed=50.0) == 50.0
    assert queue.time_left(30.0, None, elapsed=50.0) == 30.0
    assert queue.time_left(None, 100.0, elapsed=120.0) == 0.0
    assert queue.time_left(None, None, elapsed=5.0) is None


def test_a_queued_jobs_start_counts_the_running_jobs_time_left(
    database: Database, settings: Settings, user_id: int
) -> None:
    """What the running job's estimate leaves (its loop's ETA says less: the time outside
    the loop is still to come), then the runs of the jobs before it."""
    running, first, second = (new_job(database, settings, user_id) for _ in range(3))
    assert claim(database) == running
    with database.session() as session:
        jobs = {job.id: job for job in session.scalars(select(Job))}
        jobs[running].estimated_run_seconds, jobs[running].eta_seconds = 100.0, 70.0
        jobs[first].estimated_run_seconds = 40.0
        session.flush()
        places = queue.places(session, jobs.values())
        finish = to_job(jobs[running]).estimated_finish  # OpenAI's job object, alike
    assert running not in places and (places[first].ahead, places[second].ahead) == (0, 1)
    left = places[first].starts_in_seconds
    assert left is not None and 70 < left <= 100  # 100 s less the seconds since its claim
    assert places[second].starts_in_seconds == pytest.approx(left + 40, abs=0.2)
    assert finish is not None and abs(finish - (utcnow().timestamp() + left)) < 3


def test_a_run_is_estimated_at_the_last_jobs_speed_with_its_time_outside_the_loop(
    database: Database, settings: Settings, user_id: int
) -> None:
    """A job's estimate at its creation, for the start of those behind it: at the last
    job's speed, and with the time that job spent loading, measuring and saving."""
    with database.session() as session:
        last = create_job(session, settings, user_id)
        assert last.estimated_run_seconds and last.estimated_run_seconds > 0  # this CPU's speed
        finished = utcnow()
        last.status, last.device = "succeeded", "cpu"
        last.started_at, last.finished_at = finished - timedelta(seconds=100), finished
        estimated = []
        for in_loop in (60.0, 90.0):  # 40 s, then 10 s, outside the loop
            last.metrics = JobMetrics(tokens_per_second=1_000.0, train_runtime_s=in_loop)
            session.flush()
            estimated.append(create_job(session, settings, user_id).estimated_run_seconds)
        user = session.get(User, user_id)
        assert user
        shown = estimates.estimate(  # as the new job's page shows it: the same run
            session,
            user=user,
            storage=Storage(settings.data_dir),
            settings=settings,
            request=JobCreate(qa_pairs=[{"question": "q", "answer": "a"}]),
            device_plan=cpu_plan(),
        )
    assert estimated[0] is not None and estimated[1] is not None
    assert estimated[0] - estimated[1] == pytest.approx(30.0, abs=0.11)
    assert shown.estimated_from == "last_job" and shown.estimated_run_seconds == estimated[1]
    assert shown.estimated_seconds == pytest.approx(estimated[1] - 10.0, abs=0.11)


def test_a_claim_on_postgresql_skips_a_row_another_claim_holds(
    database: Database, settings: Settings, user_id: int, database_url: str | None
) -> None:
    if database_url is None:
        pytest.skip("SQLite has one writer at a time: there is no row lock to skip")
    first, second = (new_job(database, settings, user_id) for _ in range(2))
    with database.session() as holder:  # another worker, mid-claim, holding the oldest row
        holder.execute(select(Job.id).where(Job.id == first).with_for_update())
        claimed: list[int | None] = []
        thread = threading.Thread(target=lambda: claimed.append(claim(database, "w2")))
        thread.start()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the claim waited on the held row"
    assert claimed == [second]
    assert claim(database, "w3") == first  # free again once the holder is done


def test_outcomes_become_statuses(database: Database, settings: Settings, user_id: int) -> None:
    done, failed = new_job(database, settings, user_id), new_job(database, settings, user_id)
    claim(database), claim(database)
    job = settle(database, done, Succeeded(METRICS, RESOLVED))
    assert job.status == "succeeded" and job.metrics.train_steps == 3
    assert job.resolved_hyperparameters == RESOLVED and job.finished_at
    job = settle(database, failed, Failed(verbatim("bad data")))
    assert (job.status, job.error) == ("failed", "bad data")
    with pytest.raises(ConflictError, match="cannot become"):
        settle(database, done, Cancelled())  # a finished job stays finished


def test_a_base_is_one_a_user_has_a_model_on_only_while_that_model_can_be_asked(
    database: Database, settings: Settings, user_id: int
) -> None:
    def has_model_on(base: str, user: int = user_id) -> bool:
        with database.session() as session:
            owner = session.get(User, user)
            assert owner
            return jobs_service.has_model_on(session, user=owner, base_model=base)

    job_id = new_job(database, settings, user_id)
    with database.session() as session:
        base = session.get_one(Job, job_id).base_model
        other = User(username="other", password_hash="x", is_admin=False)
        session.add(other)
        session.flush()
        other_id = other.id
    assert not has_model_on(base)  # queued: no model yet
    claim(database)
    settle(database, job_id, Succeeded(METRICS, RESOLVED))
    assert has_model_on(base) and not has_model_on("another/base")
    assert not has_model_on(base, other_id)  # not theirs
    with database.session() as session:
        session.get_one(Job, job_id).model_deleted_at = utcnow()
    assert not has_model_on(base)


def test_a_cancel_that_ends_in_a_kill_is_a_cancel(
    database: Database, settings: Settings, user_id: int
) -> None:
    job_id = new_job(database, settings, user_id)
    claim(database)
    with database.session() as session:
        user = session.get(User, user_id)
        assert user
        jobs_service.cancel_job(session, user=user, job_id=job_id)
    assert settle(database, job_id, Failed(verbatim("killed (SIGKILL)"))).status == "cancelled"


def test_a_job_stopped_with_the_service_is_queued_again_without_counting_a_failure(
    database: Database, settings: Settings, user_id: int
) -> None:
    job_id = new_job(database, settings, user_id)
    claim(database)
    job = settle(database, job_id, Paused(0), stopping=True)
    assert (job.status, job.failures) == ("queued", 0)
    assert claim(database) == job_id


def checkpointed(database: Database, job_id: int, step: int) -> None:
    with database.session() as session:
        event = TrainingEvent("INFO", said("saved"), Checkpointed(step=step, train_loss=1.0))
        job_runs.record_events(session, job_id=job_id, events=[event])


def test_a_dead_workers_job_resumes_however_often_the_service_dies(
    database: Database, settings: Settings, user_id: int
) -> None:
    job_id = new_job(database, settings, user_id)
    for _ in range(5):  # more deaths than QATUNE_MAX_JOB_ATTEMPTS: restarts never count
        assert claim(database, "host-a:999999") == job_id
        with database.session() as session:
            recovered = job_runs.recover_orphaned_jobs(
                session, settings=settings, host="host-a", pid_alive=lambda pid: False
            )
            assert recovered == [job_id]
        job = status(database, job_id)
        assert (job.status, job.failures) == ("queued", 0)
    assert job.attempts == 5


def test_a_killed_run_resumes_while_it_makes_progress_then_fails_when_it_does_not(
    database: Database, settings: Settings, user_id: int
) -> None:
    job_id = new_job(database, settings, user_id)
    killed = Interrupted(said("the training process was killed ({signal})", signal="SIGKILL"))
    for step in (4, 8, 12):  # killed three times, each after a new checkpoint
        claim(database)
        checkpointed(database, job_id, step)
        job = settle(database, job_id, killed)
        assert (job.status, job.failures) == ("queued", 0)
    claim(database)  # dies again at step 12: no progress
    assert settle(database, job_id, killed).failures == 1
    claim(database)
    job = settle(database, job_id, killed)
    assert (job.status, job.failures) == ("failed", 2)
    assert job.error == (
        "The job was given up: the training process was killed (SIGKILL), 2 time(s) with no "
        "progress in between"
    )


def test_deaths_count_only_while_nothing_is_learned_between_them(
    database: Database, settings: Settings, user_id: int
) -> None:
    """A death without progress, then progress, then another death: one death in a row,
    not two (the job was once failed here at 23 of 80 steps with checkpoints between)."""
    job_id = new_job(database, settings, user_id)
    killed = Interrupted(said("the training process was killed ({signal})", signal="SIGKILL"))
    claim(database)
    checkpointed(database, job_id, 4)
    assert settle(database, job_id, killed).failures == 0
    claim(database)  # dies again at step 4: no progress
    assert settle(database, job_id, killed).failures == 1
    claim(database)
    checkpointed(database, job_id, 8)  # progress: the count starts over
    assert settle(database, job_id, killed).failures == 0
    claim(database)  # no progress since step 8
    job = settle(database, job_id, killed)
    assert (job.status, job.failures) == ("queued", 1)


def test_pause_and_resume(database: Database, settings: Settings, user_id: int) -> None:
    job_id = new_job(database, settings, user_id)
    with database.session() as session:
        user = session.get(User, user_id)
        assert user
        assert jobs_service.pause_job(session, user=user, job_id=job_id).status == "paused"
    assert claim(database) is None  # a paused job is not claimed
    with database.session() as session:
        user = session.get(User, user_id)
        assert user
        assert jobs_service.resume_job(session, user=user, job_id=job_id).status == "queued"
    claim(database)
    with database.session() as session:
        user = session.get(User, user_id)
        assert user
        assert jobs_service.pause_job(session, user=user, job_id=job_id).pause_requested
        assert job_runs.heartbeat(session, job_id=job_id) == "pause"
    checkpointed(database, job_id, 3)
    job = settle(database, job_id, Paused(3))
    assert (job.status, job.checkpoint_step, job.pause_requested) == ("paused", 3, False)
    with database.session() as session:
        user = session.get(User, user_id)
        assert user
        with pytest.raises(ConflictError, match="only queued or running jobs pause"):
            jobs_service.pause_job(session, user=user, job_id=job_id)


def test_what_a_user_may_do_is_what_the_job_lists_and_asking_twice_changes_nothing(
    database: Database, settings: Settings, user_id: int
) -> None:
    """Cancel, pause, resume and delete are refused exactly where `actions` leaves them
    out; a cancel or pause asked again while the job stops is answered, adding nothing."""
    job_id = new_job(database, settings, user_id)
    claim(database)

    def act(do: str) -> tuple[Job, list[str]]:
        with database.session() as session:
            user = session.get(User, user_id)
            assert user
            extra = {"storage": Storage(settings.data_dir)} if do == "delete" else {}
            job = getattr(jobs_service, f"{do}_job")(session, user=user, job_id=job_id, **extra)
            said_ = [
                e.message for e in jobs_service.list_events(session, job=job, after=0, limit=100)
            ]
            return job, said_

    job, said_before = act("pause")
    assert job.pause_requested and JobAction.PAUSE not in actions(job)
    job, said_after = act("pause")  # asked again while it stops
    assert job.pause_requested and said_after == said_before
    job, said_before = act("cancel")
    assert job.cancel_requested and actions(job) == []
    job, said_after = act("cancel")
    assert said_after == said_before
    for refused in ("pause", "resume", "delete"):
        with pytest.raises(ConflictError):
            act(refused)


def test_live_workers_on_other_hosts_are_left_alone_until_heartbeats_stop(
    database: Database, settings: Settings, user_id: int
) -> None:
    job_id = new_job(database, settings, user_id)
    claim(database, "other-host:1")
    with database.session() as session:
        assert not job_runs.recover_orphaned_jobs(
            session, settings=settings, host="here", pid_alive=lambda pid: True
        )
    later = utcnow() + timedelta(seconds=settings.heartbeat_timeout_seconds + 1)
    with database.session() as session:
        assert job_runs.recover_orphaned_jobs(
            session, settings=settings, host="here", pid_alive=lambda pid: True, now=later
        ) == [job_id]


def test_a_worker_never_recovers_the_jobs_it_is_running(
    database: Database, settings: Settings, user_id: int
) -> None:
    """Its own pid reads as dead (a restarted process may reuse it); a worker running
    several jobs at once (Ray) checks for orphans while its jobs run."""
    mine, orphan = new_job(database, settings, user_id), new_job(database, settings, user_id)
    claim(database, "here:7")
    claim(database, "here:7")
    with database.session() as session:
        recovered = job_runs.recover_orphaned_jobs(
            session, settings=settings, host="here", pid_alive=lambda pid: False,
            running_here={mine},
        )  # fmt: skip
    assert recovered == [orphan]


def test_progress_events_update_the_job(
    database: Database, settings: Settings, user_id: int
) -> None:
    job_id = new_job(database, settings, user_id)
    progress = Progress(
        step=3,
        total_steps=10,
        epoch=0.3,
        loss=1.5,
        learning_rate=1e-3,
        tokens_per_second=900.0,
        eta_seconds=7.0,
        memory=MemorySnapshot(rss_mb=512.0),
    )
    with database.session() as session:
        job_runs.record_events(
            session, job_id=job_id, events=[TrainingEvent("INFO", said("step 3/10"), progress)]
        )
    job = status(database, job_id)
    assert (job.step, job.total_steps, job.metrics.loss, job.metrics.rss_mb) == (
        3,
        10,
        1.5,
        512.0,
    )
    with database.session() as session:
        events = jobs_service.list_events(session, job=job, after=0, limit=10)
    assert [e.seq for e in events] == [1, 2]  # after "Job queued"
    assert events[1].data == progress  # typed, in and out of the database


def test_the_final_count_of_learned_answers_is_the_jobs_outcome(
    database: Database, settings: Settings, user_id: int
) -> None:
    """An auto job that ends below its target of every answer learned says so; with
    question noise, each epoch's count of the questions as written is shown beside the
    noisy one until the final count, which is of the questions as written; an epoch that
    counted once leaves no earlier epoch's share behind."""
    job_id = new_job(database, settings, user_id)

    def metrics_after(event: Learned) -> JobMetrics:
        with database.session() as session:
            job_runs.record_events(
                session, job_id=job_id, events=[TrainingEvent("INFO", said("epoch"), event)]
            )
        return status(database, job_id).metrics

    epoch = Learned(
        epoch=20, learned=15, examples=15, token_accuracy=1.0, settling=True, written=12
    )
    metrics = metrics_after(epoch)
    assert (metrics.train_exact_match, metrics.train_written_match) == (1.0, 0.8)
    metrics = metrics_after(epoch.model_copy(update={"learned": 14, "written": None}))
    assert metrics.train_exact_match == round(14 / 15, 4)
    assert metrics.train_written_match is None, "an epoch that counted once: no stale share"
    metrics_after(epoch)
    final = Learned(
        epoch=24, learned=14, examples=15, token_accuracy=0.99, settling=True, final=True
    )
    metrics = metrics_after(final)
    assert metrics.train_exact_match == round(14 / 15, 4)
    assert metrics.train_written_match is None, "one count at the end"
    outcome = metrics.outcome()
    assert outcome is not None and (outcome.learned, outcome.examples) == (14, 15)
    assert not outcome.target_met and "below the target" in outcome.summary
    metrics = metrics_after(final.model_copy(update={"learned": 15, "kept_epoch": 20}))
    assert metrics.kept_epoch == 20
    outcome = metrics.outcome()
    assert outcome is not None and outcome.target_met


@pytest.mark.parametrize(
    ("first", "final", "cause"),
    [
        (3.2, 9.1, "the learning rate is the likely cause"),  # a rate of 0.1: it diverged
        (3.2, float("nan"), "the learning rate is the likely cause"),
        (3.2, 0.8, "it needs more epochs"),  # it was learning, and stopped too soon
    ],
)
def test_a_job_that_learned_nothing_says_what_the_likely_cause_is(
    first: float, final: float, cause: str
) -> None:
    metrics = JobMetrics(train_learned=0, train_examples=34, first_loss=first, final_loss=final)
    outcome = metrics.outcome()
    assert outcome is not None and not outcome.target_met
    assert outcome.summary.startswith("none of the 34 training answers was learned")
    assert cause in outcome.summary


def test_a_run_out_of_disk_space_waits_paused_and_goes_on_once_there_is_room(
    database: Database, settings: Settings, user_id: int
) -> None:
    waiting, paused_by_user = (
        new_job(database, settings, user_id),
        new_job(database, settings, user_id),
    )
    for job_id in (waiting, paused_by_user):
        claim(database)
        checkpointed(database, job_id, 6)
        job = settle(database, job_id, OutOfSpace(said("the disk holding qatune's data is full")))
        assert (job.status, job.waiting_for_disk, job.failures) == ("paused", True, 0)
    with database.session() as session:
        user = session.get(User, user_id)
        assert user
        jobs_service.resume_job(session, user=user, job_id=paused_by_user)  # resumed sooner
    assert not status(database, paused_by_user).waiting_for_disk
    with database.session() as session:
        assert job_runs.resume_jobs_waiting_for_disk(session, free_mb=900) == [waiting]
        assert job_runs.resume_jobs_waiting_for_disk(session, free_mb=900) == []
    job = status(database, waiting)
    assert (job.status, job.waiting_for_disk, job.checkpoint_step) == ("queued", False, 6)


def test_files_written_for_a_job_that_is_not_committed_are_removed(
    database: Database, settings: Settings, user_id: int
) -> None:
    jobs = settings.data_dir / "jobs"
    with pytest.raises(RuntimeError, match="commit refused"):
        with database.session() as session:
            create_job(session, settings, user_id)
            assert len(list(jobs.iterdir())) == 1  # its own copy of the pairs, written
            raise RuntimeError("commit refused")  # as a full disk refuses SQLite's commit
    assert list(jobs.iterdir()) == []
    new_job(database, settings, user_id)  # a committed one keeps its files
    assert len(list(jobs.iterdir())) == 1


def test_a_checkpoint_keeps_its_own_time_and_the_loss_at_its_step(
    database: Database, settings: Settings, user_id: int
) -> None:
    job_id = new_job(database, settings, user_id)
    storage = Storage(settings.data_dir)
    job = status(database, job_id)
    folder = storage.checkpoints_dir(job.storage_key) / "step-000010"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    (folder / "adapter_model.safetensors").write_bytes(b"")
    saved = "2026-11-24T10:00:00+00:00"
    metadata = {"base_model": "builtin:tiny", "metrics": {"step": 10, "train_loss": 0.78}}
    (folder / "qatune_adapter.json").write_text(json.dumps({**metadata, "created_at": saved}))
    os.utime(folder)  # the job's end drops the optimizer state: the folder's time moves
    [listed] = trained_models.checkpoints(storage, job)
    assert (listed.step, listed.train_loss) == (10, 0.78)
    assert listed.created_at == datetime.fromisoformat(saved)


def test_the_curve_migration_fills_in_the_progress_events_there_are(
    database: Database, settings: Settings, user_id: int
) -> None:
    """Migration 0012 made job_curve: a database from before it gets the figures of the
    progress events it holds (here: its rows removed and the table dropped, then upgraded)."""
    from alembic.config import Config
    from sqlalchemy import delete

    from alembic import command
    from app.db.models import JobCurvePoint
    from app.db.session import ALEMBIC_DIR

    job_id = new_job(database, settings, user_id)
    with database.session() as session:
        job = session.get(Job, job_id)
        assert job
        for step in (1, 2):
            progress = Progress(
                step=step, total_steps=2, epoch=step / 2, loss=3.0 - step, learning_rate=1e-4,
                tokens_per_second=1.0, eta_seconds=1.0, memory=MemorySnapshot(rss_mb=1.0),
            )  # fmt: skip
            jobs_service.add_event(session, job, "INFO", said("a step"), progress)
            session.flush()
        session.execute(delete(JobCurvePoint))
    config = Config()
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    config.attributes["connection_url"] = database.url
    command.downgrade(config, "0011")
    command.upgrade(config, "head")
    with database.session() as session:
        points = session.scalars(select(JobCurvePoint).order_by(JobCurvePoint.seq)).all()
        assert [(p.job_id, p.step, p.loss) for p in points] == [(job_id, 1, 2.0), (job_id, 2, 1.0)]


def test_a_figure_set_or_cleared_by_a_name_that_is_no_figure_is_refused() -> None:
    """Stored metrics may carry figures no longer kept (ignored when read); a misspelt name
    in the code that records them fails instead of dropping the figure unseen."""
    assert JobMetrics.model_validate({"loss": 1.0, "retired": 2}).loss == 1.0
    metrics = JobMetrics(loss=1.0, train_written_match=0.5)
    assert metrics.with_(loss=0.5).cleared("train_written_match").loss == 0.5
    with pytest.raises(TypeError, match="not a job metric: lose"):
        metrics.with_(lose=0.5)
    with pytest.raises(TypeError, match="not a job metric: train_writen_match"):
        metrics.cleared("train_writen_match")
