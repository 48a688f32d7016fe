"""The local worker with real training children on the built-in model, on a real SQLite file."""

import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select

from app.core.config import Settings
from app.db.models import Job, JobEvent, User
from app.ml.device import probe_capabilities
from app.ml.device_benchmark import RESULT_FILE
from app.ml.events import DeviceChosen, Progress, Resumed, WorkerMemory
from app.runtime import Runtime
from app.schemas.jobs import JobCreate
from app.services.jobs import lifecycle as jobs_service
from app.worker.supervisor import Worker
from tests.conftest import prepare_data_dir, qa_pairs


def make_runtime(tmp_path: Path, model_cache: Path, **extra: float) -> Runtime:
    data_dir = tmp_path / "data"
    prepare_data_dir(data_dir, model_cache)
    settings = Settings(
        data_dir=data_dir,
        log_dir=tmp_path / "logs",
        offline=True,
        heartbeat_seconds=0.5,
        cancel_grace_seconds=5,
        **extra,  # type: ignore[arg-type]
    )
    return Runtime(settings)


def queue_job(runtime: Runtime, base_model: str = "builtin:tiny", **hyperparameters: object) -> int:
    with runtime.database.session() as session:
        user = session.scalar(select(User).where(User.username == "u"))
        if user is None:
            user = User(username="u", password_hash="x", is_admin=False)
            session.add(user)
            session.flush()
        job = jobs_service.create_job(
            session,
            user=user,
            storage=runtime.storage,
            settings=runtime.settings,
            device_plan=runtime.device_plan,
            request=JobCreate.model_validate(
                {
                    "base_model": base_model,
                    "qa_pairs": qa_pairs()[:8],
                    "hyperparameters": hyperparameters,
                }
            ),
        )
        return job.id


def job_and_events(runtime: Runtime, job_id: int) -> tuple[Job, list[JobEvent]]:
    with runtime.database.session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job, jobs_service.list_events(session, job=job, after=0, limit=1000)


@pytest.mark.slow
def test_a_job_trains_on_the_benchmarks_winner_and_says_so(
    tmp_path: Path, model_cache: Path
) -> None:
    # This machine as if it had a CUDA GPU: CUDA > MPS > CPU would pick the GPU, but the
    # benchmark recorded here found the CPU faster for this model.
    with_gpu = replace(
        probe_capabilities(),
        cuda_available=True,
        cuda_name="Fake GPU",
        cuda_bf16=True,
        cuda_memory_gb=16.0,
    )
    data_dir = tmp_path / "data"
    prepare_data_dir(data_dir, model_cache)
    run = {"tokens_per_second": 5000.0, "precision": "bf16", "seconds": 2.0}
    (data_dir / RESULT_FILE).write_text(
        json.dumps(
            {
                "model": "builtin:tiny",
                "winner": "cpu",
                "results": {"cpu": run, "cuda": {**run, "tokens_per_second": 900.0}},
                "steps": 6,
                "measured_at": "2026-11-22T00:00:00+00:00",
            }
        )
    )
    runtime = Runtime(
        Settings(data_dir=data_dir, log_dir=tmp_path / "logs", offline=True),
        capabilities=with_gpu,
    )
    assert runtime.device_plan.device == "cpu"
    job_id = queue_job(runtime, max_steps=2)
    assert Worker(runtime.worker_context()).run_next()
    job, events = job_and_events(runtime, job_id)
    assert job.status == "succeeded", job.error
    assert job.device == "cpu"
    device = next(e for e in events if isinstance(e.data, DeviceChosen))
    assert "fastest in the benchmark recorded on this machine" in device.message
    assert isinstance(device.data, DeviceChosen) and device.data.device == "cpu"
    assert job.resolved_hyperparameters and job.resolved_hyperparameters.batch_size == 8


@pytest.mark.slow
def test_the_outcome_of_each_ending_becomes_the_status(tmp_path: Path, model_cache: Path) -> None:
    runtime = make_runtime(tmp_path, model_cache)
    worker = Worker(runtime.worker_context())
    failing = queue_job(runtime)
    with runtime.database.session() as session:  # (created for a model that was here once)
        job = session.get(Job, failing)
        assert job is not None
        job.base_model = "someone/not-cached-here"  # offline: the run cannot load it
    assert worker.run_next()
    job, _ = job_and_events(runtime, failing)
    assert job.status == "failed" and "not cached" in (job.error or "")

    cancelled = queue_job(runtime, epochs=100)

    def cancel_once_training() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with runtime.database.session() as session:
                job = session.get(Job, cancelled)
                if job is not None and job.step >= 1:
                    job.cancel_requested = True
                    return
            time.sleep(0.2)

    canceller = threading.Thread(target=cancel_once_training)
    canceller.start()
    started = time.monotonic()
    assert worker.run_next()
    canceller.join()
    job, events = job_and_events(runtime, cancelled)
    assert job.status == "cancelled" and time.monotonic() - started < 120
    assert not runtime.storage.adapter_dir(job.storage_key).exists()
    assert {e.data.when for e in events if isinstance(e.data, WorkerMemory)} == {
        "before",
        "after",
    }


def wait_until(predicate: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_killed_training_child_resumes_from_its_checkpoint(
    tmp_path: Path, model_cache: Path
) -> None:
    runtime = make_runtime(tmp_path, model_cache)
    worker = Worker(runtime.worker_context())
    job_id = queue_job(runtime, epochs=30)  # 30 steps of one batch, a checkpoint each 3
    runner = threading.Thread(target=worker.run_next)
    runner.start()
    wait_until(lambda: bool(job_and_events(runtime, job_id)[0].checkpoint_step))
    assert worker.child_pid is not None
    os.kill(worker.child_pid, signal.SIGKILL)
    runner.join(60)
    job, events = job_and_events(runtime, job_id)
    assert (job.status, job.failures) == ("queued", 0)
    assert "training process was killed (SIGKILL)" in events[-2].message
    saved = job.checkpoint_step
    assert worker.run_next()
    job, events = job_and_events(runtime, job_id)
    assert job.status == "succeeded", job.error
    resumed = [e.data.step for e in events if isinstance(e.data, Resumed)]
    assert resumed and resumed[0] >= (saved or 0)
    assert job.metrics.train_steps == 30
    # Settled: the checkpoints stay as adapters, without their optimizer state.
    checkpoints = list(runtime.storage.checkpoints_dir(job.storage_key).iterdir())
    assert checkpoints and not any((c / "training_state.pt").exists() for c in checkpoints)


@pytest.mark.slow
def test_a_run_goes_on_while_other_writers_hold_the_database(
    tmp_path: Path, model_cache: Path
) -> None:
    """SQLite held by another writer past the busy timeout (a burst of requests) while a
    job trains: its events wait for the next write, the run is not ended (before: "could
    not run", the training child killed and the job queued again)."""
    runtime = make_runtime(tmp_path, model_cache, database_busy_seconds=0.2)
    worker = Worker(runtime.worker_context())
    job_id = queue_job(runtime, epochs=30)
    runner = threading.Thread(target=worker.run_next)
    runner.start()
    wait_until(lambda: job_and_events(runtime, job_id)[0].step >= 1)
    other = sqlite3.connect(runtime.settings.data_dir / "qatune.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the write lock, held over several heartbeats
    time.sleep(3)
    other.execute("ROLLBACK")
    other.close()
    runner.join(120)
    job, events = job_and_events(runtime, job_id)
    assert (job.status, job.attempts) == ("succeeded", 1), job.error
    assert job.metrics is not None and job.metrics.train_steps == 30
    steps = [e.data.step for e in events if isinstance(e.data, Progress)]
    assert steps == sorted(steps)  # those written late, in their place


@pytest.mark.slow
def test_a_job_interrupted_by_the_worker_stopping_goes_back_to_the_queue(
    tmp_path: Path, model_cache: Path
) -> None:
    runtime = make_runtime(tmp_path, model_cache)
    worker = Worker(runtime.worker_context())
    job_id = queue_job(runtime, epochs=100)
    runner = threading.Thread(target=worker.run_next)
    runner.start()
    deadline = time.monotonic() + 120
    while job_and_events(runtime, job_id)[0].step < 1:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    worker._stopping.set()  # what stop() does, without joining a thread that never started
    runner.join(60)
    job, events = job_and_events(runtime, job_id)
    assert (job.status, job.failures) == ("queued", 0)
    assert any("the service is stopping" in e.message for e in events)


def test_a_job_paused_for_the_disk_goes_on_only_once_the_disk_has_room(
    tmp_path: Path, model_cache: Path
) -> None:
    runtime = make_runtime(tmp_path, model_cache)
    job_id = queue_job(runtime)
    with runtime.database.session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        job.status, job.waiting_for_disk = "paused", True
    free_mb = runtime.disk().free_bytes // 2**20
    # Room under the threshold: a warning, and the job waits.
    low = Worker(replace(runtime.worker_context(), settings=runtime.settings.model_copy(
        update={"disk_low_mb": free_mb + 1024})))  # fmt: skip
    assert low.watch_disk().level == "low"
    assert job_and_events(runtime, job_id)[0].status == "paused"
    # Room over it: queued again, to go on from its checkpoint.
    roomy = Worker(replace(runtime.worker_context(), settings=runtime.settings.model_copy(
        update={"disk_low_mb": 0})))  # fmt: skip
    assert roomy.watch_disk().level == "ok"
    job, events = job_and_events(runtime, job_id)
    assert (job.status, job.waiting_for_disk) == ("queued", False)
    assert "the disk has room again" in events[-1].message
