"""A job's states, the one table of moves between them, and what changes with each move.

queued ──claim──► running ──► succeeded | failed | cancelled
  │  ▲                 │  └─(interrupted: resumes from its last checkpoint)─► queued
  │  └──resume── paused ◄──pause (at a checkpoint)
  └──pause──► paused;  queued | paused ──cancel──► cancelled

`move` checks a change against the table and says which fields change with it. The job
service applies a move to a loaded job, and the claim writes the very same values in one
atomic UPDATE; nothing else sets a status.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from app.core.errors import ConflictError
from app.core.language import deferred, tr


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


QUEUED, RUNNING, PAUSED, SUCCEEDED, FAILED, CANCELLED = JobStatus
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
TRANSITIONS: Mapping[JobStatus, frozenset[JobStatus]] = {
    QUEUED: frozenset({RUNNING, PAUSED, CANCELLED}),
    RUNNING: frozenset({SUCCEEDED, FAILED, CANCELLED, QUEUED, PAUSED}),
    PAUSED: frozenset({QUEUED, CANCELLED}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    CANCELLED: frozenset(),
}


class IllegalTransition(ConflictError):
    """The table has no such move (a 409: the job is not in a state that allows it)."""


@dataclass(frozen=True)
class Move:
    """A status change and the fields that change with it."""

    status: JobStatus
    values: Mapping[str, object]  # field name -> its new value
    new_attempt: bool = False  # a run starts: `attempts` goes up by one


def move(
    job_id: int, source: str, target: JobStatus, *, now: datetime, worker_id: str | None = None
) -> Move:
    """The move from `source` to `target`; IllegalTransition if the table has none."""
    current = JobStatus(source)
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(
            tr(
                "Job {job_id} is {status}; it cannot become {target}",
                job_id=job_id,
                status=current,
                target=target,
            )
        )
    if target == RUNNING:  # a claim: this worker's run starts now, with no stale requests
        values: dict[str, object] = {
            "started_at": now,
            "heartbeat_at": now,
            "worker_id": worker_id,
            "cancel_requested": False,
        }
        return Move(target, values, new_attempt=True)
    values = {
        "eta_seconds": None,
        "worker_id": None,
        "pause_requested": False,
        "waiting_for_disk": False,  # a move out of a wait for room ends it; see job_runs
    }
    if target in TERMINAL:
        values["finished_at"] = now
    return Move(target, values)


class JobFacts(Protocol):
    """What the rules below read of a job (the database row has it)."""

    @property
    def id(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def model_deleted_at(self) -> datetime | None: ...
    @property
    def cancel_requested(self) -> bool: ...
    @property
    def pause_requested(self) -> bool: ...


def has_model(job: JobFacts) -> bool:
    """The job trained a model that can be asked, downloaded and exported."""
    return job.status == SUCCEEDED and job.model_deleted_at is None


class JobAction(StrEnum):
    """What a user may do to a job now; the API lists them, the UI offers only those."""

    CANCEL = "cancel"
    PAUSE = "pause"
    RESUME = "resume"
    DELETE = "delete"
    ASK = "ask"  # the trained model answers questions; exports and downloads go with it
    DELETE_MODEL = "delete_model"


def actions(job: JobFacts) -> list[JobAction]:
    status = JobStatus(job.status)
    allowed = []
    if status in (QUEUED, PAUSED) or (status == RUNNING and not job.cancel_requested):
        allowed.append(JobAction.CANCEL)
    if status == QUEUED or (
        status == RUNNING and not (job.cancel_requested or job.pause_requested)
    ):
        allowed.append(JobAction.PAUSE)
    if status == PAUSED:
        allowed.append(JobAction.RESUME)
    if status in TERMINAL or status == PAUSED:
        allowed.append(JobAction.DELETE)
    if has_model(job):
        allowed += [JobAction.ASK, JobAction.DELETE_MODEL]
    return allowed


# Why a user's action is not on offer now, in words that say what to do instead.
REFUSALS: Mapping[JobAction, str] = {
    JobAction.CANCEL: deferred("The job has already {status}; there is nothing to cancel"),
    JobAction.PAUSE: deferred("The job is {status}; only queued or running jobs pause"),
    JobAction.RESUME: deferred("The job is {status}; only paused jobs resume"),
    JobAction.DELETE: deferred("The job is {status}; cancel it first, then delete it"),
}


def require(job: JobFacts, action: JobAction) -> None:
    """A ConflictError saying why, unless the job offers `action` now (what `actions`
    lists is exactly what a user may do: the one decision)."""
    if action not in actions(job):
        raise ConflictError(tr(REFUSALS[action], status=job.status))
