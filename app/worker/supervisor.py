"""The worker: claims jobs while it has a free slot and supervises each one's run.

For each job it builds a `TrainingSpec`, launches a `Run` (the local executor in local.py:
a fresh training child process on this machine, one slot; the Ray executor in
ray_executor.py: a task on a cluster node, one slot per node or GPU), relays the run's events to the
database with a heartbeat, turns a cancel or pause into a stop request (then a kill after
the grace period), and hands the outcome to the job state machine, which decides the status.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Literal

import psutil
from loguru import logger
from sqlalchemy.orm import Session

from app.core.disk import MB, DiskLevel, DiskState, disk_full, disk_state, failed_for_space
from app.core.language import said
from app.db.models import Job
from app.db.session import is_busy
from app.jobs.outcomes import Interrupted, Outcome
from app.jobs.spec import TrainingSpec
from app.jobs.status import JobStatus
from app.ml.events import TrainingEvent, WorkerMemory
from app.ml.memory import memory_snapshot, release_memory
from app.ml.training.checkpoints import drop_training_state, latest_checkpoint
from app.ml.training.request import StartAdapter, TrainingRequest
from app.services.datasets.qa_parsing import read_jsonl
from app.services.evals.graders import sandbox_limits
from app.services.jobs import runs as job_runs
from app.worker.context import WorkerContext
from app.worker.local import LocalRun
from app.worker.protocol import Run

SPACE_RETRY_SECONDS = 3.0  # a full disk: how often the end of a run is recorded again


def _pid_alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and pid != os.getpid()


class Worker:
    def __init__(self, context: WorkerContext) -> None:
        self.context = context
        self.settings = context.settings
        self.database = context.database
        self.storage = context.storage
        self.host = socket.gethostname()
        self.worker_id = f"{self.host}:{os.getpid()}"
        self._stopping = threading.Event()
        self._stop_by = float("inf")  # when runs still going at a stop are killed
        self._thread: threading.Thread | None = None
        self._runs: dict[int, threading.Thread] = {}  # job id -> the thread supervising it
        self.child_pid: int | None = None  # the local executor's training child, if any
        self._disk_level = DiskLevel.OK  # as last seen, to log its changes once
        self._events_lost: dict[int, int] = {}  # job id -> events a full disk refused
        self._unsaved: dict[int, list[TrainingEvent]] = {}  # a busy database's: next time

    @property
    def current_job(self) -> int | None:
        return min(list(self._runs), default=None)

    # ------------------------------------------------------------- the executor
    runs_on_this_machine = True  # its jobs share this machine's device with the API
    runs_as = "in a training child"

    def slots(self) -> int:
        """How many jobs may run at once: the single-slot rule, per device."""
        return 1

    def executor_status(self) -> str:
        """ "ok", or why jobs cannot start (for GET /ready)."""
        return "ok"

    def launch(self, spec: TrainingSpec) -> Run:
        run = LocalRun(spec)
        self.child_pid = run.process.pid
        return run

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self.run_forever, name="qatune-worker", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def begin_stop(self, timeout: float = 30.0) -> None:
        """Claim nothing more; ask running jobs to stop at a checkpoint now (they resume
        on the next start), killing those that have not within `timeout`. Returns at once."""
        if not self._stopping.is_set():
            self._stop_by = time.monotonic() + timeout
            self._stopping.set()

    def stop(self, timeout: float = 30.0) -> None:
        """begin_stop, then wait (within its `timeout`) for the jobs to be settled."""
        self.begin_stop(timeout)
        for thread in [self._thread, *self._runs.values()]:
            if thread and thread is not threading.current_thread():
                thread.join(max(0.0, self._stop_by - time.monotonic()) + 1.0)

    def recover(self) -> list[int]:
        with self.database.session() as session:
            recovered = job_runs.recover_orphaned_jobs(
                session,
                settings=self.settings,
                host=self.host,
                pid_alive=_pid_alive,
                running_here=set(self._runs),
            )
        if recovered:
            logger.warning("Recovered jobs left running by a dead worker: {}", recovered)
        return recovered

    def run_forever(self) -> None:
        logger.info("Worker {} started", self.worker_id)
        last_recovery = time.monotonic()
        while not self._stopping.is_set():
            try:
                disk = self.watch_disk()  # while jobs run too: a warning comes before it is full
                if disk.level == DiskLevel.FULL or not self._start_next():
                    self._stopping.wait(self.settings.worker_poll_seconds)
                if time.monotonic() - last_recovery > self.settings.heartbeat_timeout_seconds:
                    self.recover()  # workers on other machines may have died
                    last_recovery = time.monotonic()
            except Exception:  # noqa: BLE001  (a DB hiccup must not end the worker)
                logger.exception("Worker loop error; retrying")
                self._stopping.wait(5)
        logger.info("Worker {} stopped", self.worker_id)

    def _start_next(self) -> bool:
        """Claim a job if a slot is free, and supervise it in a thread of its own."""
        if self._stopping.is_set() or len(self._runs) >= self.slots():
            return False
        job_id = self._claim()
        if job_id is None:
            return False
        thread = threading.Thread(
            target=self._run_once, args=(job_id,), name=f"qatune-job-{job_id}"
        )
        self._runs[job_id] = thread
        thread.start()
        return True

    def run_next(self) -> bool:
        """Claim one job and run it to its end in this thread (tests)."""
        job_id = self._claim()
        if job_id is None:
            return False
        self._runs[job_id] = threading.current_thread()
        self._run_once(job_id)
        return True

    def _run_once(self, job_id: int) -> None:
        try:
            self._run(job_id)
        finally:
            self._runs.pop(job_id, None)  # its slot is free
            self._events_lost.pop(job_id, None)
            self._unsaved.pop(job_id, None)

    def _claim(self) -> int | None:
        with self.database.session() as session:
            return job_runs.claim_next_job(session, worker_id=self.worker_id)

    # ------------------------------------------------------------------- one job
    def _run(self, job_id: int) -> None:
        with self.database.session() as session:
            job = session.get(Job, job_id)
            assert job is not None
            spec = self.spec(job)
            if self.runs_on_this_machine:
                self._cleanup(session, job, "before")
        if self.runs_on_this_machine:
            self.context.free_device_for_training()
        logger.info("Job {} starting {}", job_id, self.runs_as)
        try:
            run = self.launch(spec)
            outcome = self._supervise(job_id, run) or run.silent_end()
        except Exception as exc:  # noqa: BLE001  (an executor that cannot start the run)
            logger.exception("Job {} could not run", job_id)
            error = f"{type(exc).__name__}: {exc}"
            outcome = Interrupted(said("the executor could not run it ({error})", error=error))
        finally:
            self.child_pid = None
        job = self._settle(job_id, outcome)
        if job is not None and job.status == JobStatus.SUCCEEDED:
            # Only now: a run killed after saving its adapter but before this point must
            # still find its checkpoints whole. They stay, as servable adapters.
            drop_training_state(self.storage.checkpoints_dir(job.storage_key))
            self.context.model_ready(job.id)

    def _settle(self, job_id: int, outcome: Outcome) -> Job | None:
        """Record how the run ended. A full disk can refuse even that: then it is tried
        again every few seconds until there is room (the slot stays taken meanwhile, and
        /ready says why), or until the service must have stopped."""
        while True:
            try:
                with self.database.session() as session:
                    job = job_runs.settle(
                        session,
                        job_id=job_id,
                        outcome=outcome,
                        max_failures=self.settings.max_job_attempts,
                        service_stopping=self._stopping.is_set(),
                    )
                    if job is not None and self.runs_on_this_machine:
                        self._cleanup(session, job, "after")
                if job is not None:
                    logger.info("Job {} {}", job_id, job.status)
                return job
            except Exception as exc:
                if is_busy(exc) and time.monotonic() < self._stop_by:  # others held it
                    logger.warning("Job {} ended, but the database is busy: again", job_id)
                    continue
                if not failed_for_space(exc, self.settings.data_dir):
                    raise
                if time.monotonic() + SPACE_RETRY_SECONDS > self._stop_by:
                    raise  # the next start recovers the job from its checkpoint
                logger.warning(
                    "Job {} ended, but {}: recording it again in {:.0f} s",
                    job_id,
                    disk_full(self.settings.data_dir).english(),
                    SPACE_RETRY_SECONDS,
                )
                time.sleep(SPACE_RETRY_SECONDS)

    def watch_disk(self) -> DiskState:
        """Warn when the data directory's disk runs low (the worker claims nothing while it
        is full); once it has room again, queue the jobs that paused because it was full."""
        state = disk_state(self.settings.data_dir, low_below_mb=self.settings.disk_low_mb)
        if state.level != self._disk_level:
            log = logger.info if state.level == DiskLevel.OK else logger.warning
            log("The data directory's disk: {}", state.describe())
            self._disk_level = state.level
        if state.level == DiskLevel.OK:
            with self.database.session() as session:
                free_mb = state.free_bytes // MB
                resumed = job_runs.resume_jobs_waiting_for_disk(session, free_mb=free_mb)
            if resumed:
                logger.info("Jobs {} go on: the disk has room again ({} MB free)", resumed, free_mb)
        return state

    def spec(self, job: Job) -> TrainingSpec:
        """The run of this job: its own copy of the pairs, its settings as asked (and as
        resolved by an earlier run), its newest checkpoint to resume from."""
        storage, settings, key = self.storage, self.settings, job.storage_key
        validation, keep = storage.job_validation_file(key), storage.job_keep_file(key)
        request = TrainingRequest(
            base_model=job.base_model,
            pairs=read_jsonl(storage.job_train_file(key).read_text()),
            validation_pairs=read_jsonl(validation.read_text()) if validation.exists() else [],
            output_dir=storage.adapter_dir(key),
            model_cache_dir=storage.models_dir,
            hyperparameters=job.hyperparameters,
            device_plan=self.context.device_plan,
            offline=settings.offline,
            resolved=job.resolved_hyperparameters,
            configured_models=tuple(settings.base_models),
            checkpoint_dir=storage.checkpoints_dir(key),
            resume_from=latest_checkpoint(storage.checkpoints_dir(key)),
            cpu_threads=settings.training_threads or None,
            base_answers_dir=storage.base_answers_dir(str(job.owner_id)),
            adapter_name=f"qatune-job-{job.id}",  # the folder in the adapter's zip
            start=StartAdapter(storage.start_adapter_dir(key), job.start_model)
            if job.start_model
            else None,
            grader=job.grader,
            judges=tuple(job.judges or ()),
            keep_pairs=read_jsonl(keep.read_text()) if keep.exists() else [],
            python_graders=sandbox_limits(settings),
        )
        return TrainingSpec(
            job_id=job.id,
            request=request,
            job_log=storage.job_log(key),
            log_dir=settings.log_dir,
            torch_environment=self.context.torch_environment,
            niceness=settings.training_niceness,
        )

    def _cleanup(self, session: Session, job: Job, when: Literal["before", "after"]) -> None:
        before = memory_snapshot()
        release_memory()
        after = memory_snapshot()
        event = TrainingEvent(
            "INFO",
            said(
                "Worker memory before the job: RSS {before} → {after} MB after gc and malloc_trim"
                if when == "before"
                else "Worker memory after the job: RSS {before} → {after} MB after gc and "
                "malloc_trim",
                before=before.rss_mb,
                after=after.rss_mb,
            ),
            WorkerMemory(when=when, before=before, after=after),
        )
        job_runs.record_events(session, job_id=job.id, events=[event])

    def _supervise(self, job_id: int, run: Run) -> Outcome | None:
        """Relay events until the run ends, with a heartbeat. A cancel, a pause or the
        service stopping (a pause: stop at a checkpoint) is asked once; the run is killed
        if it has not ended after the grace period."""
        outcome: Outcome | None = None
        last_beat = 0.0
        asked_at: float | None = None
        while True:
            messages = run.receive()
            if messages is None:
                break
            events = [m for m in messages if isinstance(m, TrainingEvent)]
            outcome = next((m for m in messages if not isinstance(m, TrainingEvent)), outcome)
            now = time.monotonic()
            beat_due = now - last_beat >= self.settings.heartbeat_seconds
            if events or beat_due:
                wanted = self._record(job_id, events, beat=beat_due)
                if beat_due:
                    last_beat = now
                if wanted != "continue" and asked_at is None:
                    run.ask(wanted)
                    asked_at = now
            if self._stopping.is_set() and asked_at is None:
                run.ask("pause")  # at once, not at the next heartbeat
                asked_at = now
            if asked_at and (
                now - asked_at > self.settings.cancel_grace_seconds or now > self._stop_by
            ):
                run.kill()
        return outcome

    def _record(
        self, job_id: int, events: list[TrainingEvent], *, beat: bool
    ) -> Literal["continue", "cancel", "pause"]:
        """Write the run's events (and a heartbeat): what the run should do now. A full disk
        loses the events, not the run: it pauses itself when it cannot save. A database
        busy with other writers (SQLite, a burst of requests) keeps them for the next try:
        before, it ended the run."""
        waiting = job_id in self._unsaved  # said once a busy stretch, not each heartbeat
        events = self._unsaved.pop(job_id, []) + events
        try:
            with self.database.session() as session:
                job_runs.record_events(session, job_id=job_id, events=events)
                wanted = job_runs.heartbeat(session, job_id=job_id) if beat else "continue"
        except Exception as exc:
            if is_busy(exc):
                if not waiting:
                    logger.warning("Job {}: the database is busy; events written later", job_id)
                self._unsaved[job_id] = events
                return "continue"
            if not failed_for_space(exc, self.settings.data_dir):
                raise
            if job_id not in self._events_lost:
                full = disk_full(self.settings.data_dir).english()
                logger.warning("Job {}: its events are not recorded while {}", job_id, full)
            self._events_lost[job_id] = self._events_lost.get(job_id, 0) + len(events)
            return "continue"
        if (lost := self._events_lost.pop(job_id, None)) is not None:
            logger.warning("Job {}: events recorded again; {} were lost", job_id, lost)
        return wanted
