"""The order queued jobs run in: a turn per user in rotation.

One user's many jobs do not hold everyone else's back. Each user's oldest queued job comes
first, the users taken by their last turn (never, then longest ago); then each user's
second job, in the same order of users; and so on. With one user this is oldest first.
The claim takes the head of the line (runs.py); a queued job's place is how many queued
jobs stand before it now (one asked for later, by a user who has waited longer, may still
come in ahead), and about when it starts: the running jobs' time left and the estimated
run of each job before it.
"""

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, aliased

from app.db.base import utcnow
from app.db.models import Job
from app.jobs.status import QUEUED, RUNNING

# The row a claim locks: named, so that PostgreSQL's FOR UPDATE takes it and not the
# window and aggregate below, which it cannot lock.
CANDIDATE = aliased(Job, name="candidate")


def line() -> Select[int]:
    """The queued jobs' ids, the next to run first."""
    queued = (
        select(
            Job.id,
            func.row_number().over(partition_by=Job.owner_id, order_by=Job.id).label("round"),
            # users who never had a turn go by their oldest queued job
            func.min(Job.id).over(partition_by=Job.owner_id).label("oldest"),
        )
        .where(Job.status == QUEUED)
        .subquery("queued")
    )
    waiting = select(Job.owner_id).where(Job.status == QUEUED)
    turns = (
        select(Job.owner_id, func.max(Job.started_at).label("last"))
        .where(Job.owner_id.in_(waiting))
        .group_by(Job.owner_id)
        .subquery("turns")
    )
    return (
        select(CANDIDATE.id)
        .join(queued, queued.c.id == CANDIDATE.id)
        .join(turns, turns.c.owner_id == CANDIDATE.owner_id)
        .order_by(queued.c.round, turns.c.last.asc().nulls_first(), queued.c.oldest, CANDIDATE.id)
    )


@dataclass(frozen=True)
class Place:
    ahead: int  # the queued jobs before it
    starts_in_seconds: float | None  # about how long until it starts; None: not to be told


def places(session: Session, jobs: Iterable[Job]) -> dict[int, Place]:
    """Of these jobs, each queued one's place in the line."""
    if not any(job.status == QUEUED for job in jobs):
        return {}
    queued = session.execute(line().add_columns(CANDIDATE.estimated_run_seconds)).all()
    now = utcnow()
    running = [
        time_left(eta, estimated, (now - started).total_seconds())
        for eta, estimated, started in session.execute(
            select(Job.eta_seconds, Job.estimated_run_seconds, Job.started_at).where(
                Job.status == RUNNING
            )
        )
        if started is not None
    ]
    starts = start_times(running, [seconds for _, seconds in queued])
    return {job_id: Place(i, starts[i]) for i, (job_id, _) in enumerate(queued)}


def time_left(eta: float | None, estimated: float | None, elapsed: float) -> float | None:
    """A running job's time left: its loop's own ETA, or what its estimate leaves where
    that is longer (loading, measuring and saving lie outside the loop)."""
    if estimated is None:
        return eta
    return max(eta or 0.0, estimated - elapsed)


def start_times(running: list[float | None], queued: list[float | None]) -> list[float | None]:
    """When each queued job starts, in seconds from now, in the line's order: each takes
    the first slot to free up, a running job holding one (one slot at least: while jobs
    wait, every slot is taken). None from the first time that is not known on."""
    if None in running:
        return [None] * len(queued)
    free = [seconds for seconds in running if seconds is not None] or [0.0]
    heapq.heapify(free)
    starts: list[float | None] = []
    for seconds in queued:
        start = heapq.heappop(free)
        starts.append(round(start, 1))
        if seconds is None:
            return starts + [None] * (len(queued) - len(starts))
        heapq.heappush(free, start + seconds)
    return starts
