"""The local worker: one slot, one job at a time, each in a fresh training child process.

It claims a job, hands a child a `TrainingSpec`, relays the child's events to the
database with a heartbeat, turns a cancel into SIGTERM (then SIGKILL after the grace
period), and hands the outcome to the job state machine, which decides the status.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Literal

import psutil
from loguru import logger
from sqlalchemy.orm import Session

from app.db.models import Job, JobStatus
from app.ml.events import TrainingEvent, WorkerMemory
from app.ml.hyperparameters import HyperparameterRequest, ResolvedHyperparameters
from app.ml.memory import memory_snapshot, release_memory
from app.ml.training.checkpoints import drop_training_state, latest_checkpoint
from app.services import jobs as jobs_service
from app.worker.child import run_child
from app.worker.exits import exit_reason, oom_kill_count
from app.worker.protocol import ChildMessage, Interrupted, Outcome, TrainingSpec

if TYPE_CHECKING:
    from app.runtime import Runtime

SIGNALS = {"cancel": signal.SIGTERM, "pause": signal.SIGUSR1}


def _pid_alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and pid != os.getpid()


class Worker:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.database = runtime.database
        self.storage = runtime.storage
        self.host = socket.gethostname()
        self.worker_id = f"{self.host}:{os.getpid()}"
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.current_job: int | None = None
        self.child_pid: int | None = None  # the training child of the current job

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self.run_forever, name="qatune-worker", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        if self._thread:
            self._thread.join(timeout)

    def recover(self) -> list[int]:
        with self.database.session() as session:
            recovered = jobs_service.recover_orphaned_jobs(
                session, settings=self.settings, host=self.host, pid_alive=_pid_alive
            )
        if recovered:
            logger.warning("Recovered jobs left running by a dead worker: {}", recovered)
        return recovered

    def run_forever(self) -> None:
        logger.info("Worker {} started", self.worker_id)
        last_recovery = time.monotonic()
        while not self._stopping.is_set():
            try:
                if not self.run_next():
                    self._stopping.wait(self.settings.worker_poll_seconds)
                if time.monotonic() - last_recovery > self.settings.heartbeat_timeout_seconds:
                    self.recover()  # workers on other machines may have died
                    last_recovery = time.monotonic()
            except Exception:  # noqa: BLE001  (a DB hiccup must not end the worker)
                logger.exception("Worker loop error; retrying")
                self._stopping.wait(5)
        logger.info("Worker {} stopped", self.worker_id)

    def run_next(self) -> bool:
        with self.database.session() as session:
            job_id = jobs_service.claim_next_job(session, worker_id=self.worker_id)
        if job_id is None:
            return False
        self.current_job = job_id
        try:
            self._run(job_id)
        finally:
            self.current_job = None
        return True

    # ------------------------------------------------------------------- one job
    def _run(self, job_id: int) -> None:
        with self.database.session() as session:
            job = session.get(Job, job_id)
            assert job is not None
            spec = self.spec(job)
            self._cleanup(session, job, "before")
        self.runtime.free_device_for_training()
        logger.info("Job {} starting in a training child", job_id)
        context = multiprocessing.get_context("spawn")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=run_child, args=(spec, sender), name=f"train-job-{job_id}")
        oom_kills = oom_kill_count()
        child.start()
        self.child_pid = child.pid
        sender.close()
        try:
            outcome = self._supervise(job_id, child, receiver)
            child.join()
        finally:
            self.child_pid = None
        if outcome is None:
            outcome = Interrupted(exit_reason(child.exitcode, oom_kills_before=oom_kills))
        with self.database.session() as session:
            job = jobs_service.settle(
                session,
                job_id=job_id,
                outcome=outcome,
                max_failures=self.settings.max_job_attempts,
                service_stopping=self._stopping.is_set(),
            )
            if job is not None:
                self._cleanup(session, job, "after")
                logger.info("Job {} {}", job_id, job.status)
        if job is not None and job.status == JobStatus.SUCCEEDED:
            # Only now: a run killed after saving its adapter but before this point must
            # still find its checkpoints whole. They stay, as servable adapters.
            drop_training_state(self.storage.checkpoints_dir(job.storage_key))

    def spec(self, job: Job) -> TrainingSpec:
        resolved = job.resolved_hyperparameters
        return TrainingSpec(
            job_id=job.id,
            base_model=job.base_model,
            pairs_file=self.storage.job_train_file(job.storage_key),
            validation_file=(
                self.storage.job_validation_file(job.storage_key)
                if self.storage.job_validation_file(job.storage_key).exists()
                else None
            ),
            output_dir=self.storage.adapter_dir(job.storage_key),
            job_log=self.storage.job_log(job.storage_key),
            model_cache_dir=self.storage.models_dir,
            log_dir=self.settings.log_dir,
            hyperparameters=HyperparameterRequest.model_validate(job.hyperparameters),
            resolved=ResolvedHyperparameters.from_dict(resolved) if resolved else None,
            device_plan=self.runtime.device_plan,
            offline=self.settings.offline,
            configured_models=tuple(self.settings.base_models),
            torch_environment=self.runtime.torch_environment,
            checkpoint_dir=self.storage.checkpoints_dir(job.storage_key),
            resume_from=latest_checkpoint(self.storage.checkpoints_dir(job.storage_key)),
            niceness=self.settings.training_niceness,
            cpu_threads=self.settings.training_threads or None,
        )

    def _cleanup(self, session: Session, job: Job, when: Literal["before", "after"]) -> None:
        before = memory_snapshot()
        release_memory()
        after = memory_snapshot()
        event = TrainingEvent(
            "INFO",
            f"Worker memory {when} the job: RSS {before.rss_mb} → {after.rss_mb} MB "
            "after gc and malloc_trim",
            WorkerMemory(when=when, before=before, after=after),
        )
        jobs_service.record_events(session, job_id=job.id, events=[event])

    def _supervise(self, job_id: int, child: BaseProcess, receiver: Connection) -> Outcome | None:
        """Relay events until the child ends, with a heartbeat. A cancel is SIGTERM; a pause
        or the service stopping is SIGUSR1 (stop at a checkpoint); either is SIGKILL after
        the grace period."""
        outcome: Outcome | None = None
        last_beat = 0.0
        signalled_at: float | None = None
        while True:
            messages = self._drain(receiver)
            if messages is None:  # pipe closed: the child has exited
                break
            events = [m for m in messages if isinstance(m, TrainingEvent)]
            outcome = next((m for m in messages if not isinstance(m, TrainingEvent)), outcome)
            now = time.monotonic()
            beat_due = now - last_beat >= self.settings.heartbeat_seconds
            if events or beat_due:
                with self.database.session() as session:
                    jobs_service.record_events(session, job_id=job_id, events=events)
                    if beat_due:
                        wanted = jobs_service.heartbeat(session, job_id=job_id)
                        last_beat = now
                        if self._stopping.is_set() and wanted == "continue":
                            wanted = "pause"
                        if wanted != "continue" and signalled_at is None and child.pid:
                            # The trainer stops between two micro-batches.
                            os.kill(child.pid, SIGNALS[wanted])
                            signalled_at = now
            if signalled_at and now - signalled_at > self.settings.cancel_grace_seconds:
                child.kill()
        return outcome

    @staticmethod
    def _drain(receiver: Connection) -> list[ChildMessage] | None:
        messages: list[ChildMessage] = []
        try:
            if receiver.poll(0.5):
                while True:
                    messages.append(receiver.recv())
                    if not receiver.poll(0):
                        break
        except (EOFError, OSError):
            return messages or None
        return messages
