"""The worker: one slot, one job at a time, each in a fresh training child process."""

import multiprocessing
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
from loguru import logger

from app.core.config import Settings
from app.core.storage import Storage
from app.db.models import Job
from app.db.session import Database
from app.ml.memory import memory_snapshot, release_memory
from app.services import jobs as jobs_service
from app.worker.child import run_child

Message = tuple[Any, ...]


def _pid_alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and pid != os.getpid()


class Worker:
    def __init__(
        self,
        database: Database,
        settings: Settings,
        *,
        before_job: Callable[[], None] | None = None,
    ) -> None:
        self.database = database
        self.settings = settings
        self.storage = Storage(settings.data_dir)
        self.before_job = before_job
        self.host = socket.gethostname()
        self.worker_id = f"{self.host}:{os.getpid()}"
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.current_job: int | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self.run_forever, name="qatune-worker", daemon=True)
        self._thread.start()

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
            spec = self._spec(job)
            self._cleanup(session, job, "before")
        if self.before_job:
            self.before_job()
        logger.info("Job {} starting in a training child", job_id)
        context = multiprocessing.get_context("spawn")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=run_child, args=(spec, sender), name=f"train-job-{job_id}")
        child.start()
        sender.close()
        outcome = self._supervise(job_id, child, receiver)
        child.join()
        status, error, metrics = self._verdict(outcome, child.exitcode)
        with self.database.session() as session:
            job = session.get(Job, job_id)
            if job is not None and job.cancel_requested and status == "failed":
                status, error = "cancelled", None  # killed after the grace period
            if self._stopping.is_set() and status != "succeeded":
                if job is not None and not job.cancel_requested:
                    jobs_service.transition(job, jobs_service.QUEUED)
                    job.attempts -= 1
                    jobs_service.add_event(session, job, "WARNING", "Service stopping; re-queued")
                    return
            job = jobs_service.finish_job(
                session, job_id=job_id, status=status, error=error, metrics=metrics
            )
            if job is not None:
                self._cleanup(session, job, "after")
        logger.info("Job {} {}", job_id, status)

    def _spec(self, job: Job) -> dict[str, Any]:
        s = self.settings
        return {
            "job_id": job.id,
            "base_model": job.base_model,
            "train_file": str(self.storage.job_train_file(job.storage_key)),
            "output_dir": str(self.storage.adapter_dir(job.storage_key)),
            "job_log": str(self.storage.job_log(job.storage_key)),
            "model_cache_dir": str(self.storage.models_dir),
            "log_dir": str(s.log_dir),
            "hyperparameters": {k: v for k, v in job.hyperparameters.items() if k != "resolved"},
            "device": s.device,
            "offline": s.offline,
            "mps_fallback": s.mps_fallback,
            "mps_high_watermark_ratio": s.mps_high_watermark_ratio,
            "mps_low_watermark_ratio": s.mps_low_watermark_ratio,
        }

    def _cleanup(self, session: Any, job: Job, when: str) -> None:
        before = memory_snapshot()
        release_memory()
        after = memory_snapshot()
        jobs_service.add_event(
            session,
            job,
            "INFO",
            f"Worker memory {when} the job: RSS {before['rss_mb']} → {after['rss_mb']} MB "
            "after gc and malloc_trim",
            {"kind": "worker_memory", "when": when, "before": before, "after": after},
        )

    def _supervise(self, job_id: int, child: Any, receiver: Any) -> Message | None:
        """Relay events until the child ends; heartbeat; turn a cancel into SIGTERM, then KILL."""
        outcome: Message | None = None
        last_beat = 0.0
        terminated_at: float | None = None
        while True:
            messages = self._drain(receiver)
            if messages is None:  # pipe closed: the child has exited
                break
            events = [m for m in messages if m[0] == "event"]
            outcome = next((m for m in messages if m[0] != "event"), outcome)
            now = time.monotonic()
            if events or now - last_beat >= self.settings.heartbeat_seconds:
                with self.database.session() as session:
                    job = session.get(Job, job_id)
                    for _, level, message, data in events:
                        if job is not None:
                            jobs_service.add_event(session, job, level, message, data)
                            jobs_service.apply_event_data(job, data)
                    if now - last_beat >= self.settings.heartbeat_seconds:
                        cancel = jobs_service.heartbeat(session, job_id=job_id)
                        last_beat = now
                        if (cancel or self._stopping.is_set()) and terminated_at is None:
                            child.terminate()  # SIGTERM: the trainer stops at the next batch
                            terminated_at = now
            if terminated_at and now - terminated_at > self.settings.cancel_grace_seconds:
                child.kill()
        return outcome

    @staticmethod
    def _drain(receiver: Any) -> list[Message] | None:
        messages: list[Message] = []
        try:
            if receiver.poll(0.5):
                while True:
                    messages.append(receiver.recv())
                    if not receiver.poll(0):
                        break
        except (EOFError, OSError):
            return messages or None
        return messages

    def _verdict(
        self, outcome: Message | None, exitcode: int | None
    ) -> tuple[str, str | None, dict[str, Any]]:
        if outcome is None:
            if exitcode is not None and exitcode < 0:
                signal_name = {-9: "SIGKILL", -15: "SIGTERM"}.get(exitcode, f"signal {-exitcode}")
                return (
                    "failed",
                    f"The training process was killed ({signal_name}), most likely by the "
                    "operating system for lack of memory; lower max_seq_length or use a "
                    "smaller base model",
                    {},
                )
            return "failed", f"The training process exited unexpectedly (code {exitcode})", {}
        kind = outcome[0]
        if kind == "succeeded":
            return "succeeded", None, outcome[1]
        if kind == "cancelled":
            return "cancelled", None, {}
        return "failed", str(outcome[1]), {}
