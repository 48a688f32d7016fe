"""The order queued jobs run in: a turn per user in rotation.

One user's many jobs do not hold everyone else's back. Each user's oldest queued job comes
first, the users taken by their last turn (never, then longest ago); then each user's
second job, in the same order of users; and so on. With one user this is oldest first.
The claim takes the head of the line (runs.py); a queued job's place is how many queued
jobs stand before it now (one asked for later, by a user who has waited longer, may still
come in ahead).
"""

from collections.abc import Iterable

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, aliased

from app.db.models import Job
from app.jobs.status import QUEUED

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


def places(session: Session, jobs: Iterable[Job]) -> dict[int, int]:
    """Of these jobs, each queued one's place in the line: the queued jobs before it."""
    if not any(job.status == QUEUED for job in jobs):
        return {}
    return {job_id: place for place, job_id in enumerate(session.scalars(line()))}
