"""A job's training curves for its chart, at most a few hundred points however long it ran.

A job writes about one event a training second: a 3-hour job holds 10,000, a long one
100,000. The job page drew every one and scrolled its log for each (10,000 took 55 s to
open). Each progress event's figures are kept beside it (JobCurvePoint), averaged here in
the database over equal spans of events, and returned with the last event read, so that
the page draws the curve at once and follows the live stream from there.
"""

import math
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Job, JobCurvePoint, JobEvent
from app.ml.events import Progress


@dataclass(frozen=True)
class SeriesPoint:
    step: int  # the bucket's last step
    loss: float | None
    reward_margin: float | None  # DPO
    reward_mean: float | None  # reinforcement


@dataclass(frozen=True)
class ProgressSeries:
    points: list[SeriesPoint]
    steps_read: int  # progress events behind the points
    through: int  # the last progress event's seq: the live stream's come after it
    latest: Progress | None  # that event, for the figures shown beside the chart


def progress_series(session: Session, *, job: Job, points: int) -> ProgressSeries:
    """Averaged in the database over equal spans of events: a few hundred rows cross into
    Python, not one per step."""
    of_job = JobCurvePoint.job_id == job.id
    first, last, count = session.execute(
        select(func.min(JobCurvePoint.seq), func.max(JobCurvePoint.seq), func.count()).where(of_job)
    ).one()
    if not count:
        return ProgressSeries(points=[], steps_read=0, through=0, latest=None)
    width = max(1, math.ceil((last - first + 1) / points))
    bucket = (JobCurvePoint.seq - first) // width
    rows = session.execute(
        select(
            func.max(JobCurvePoint.step),
            func.avg(JobCurvePoint.loss),
            func.avg(JobCurvePoint.reward_margin),
            func.avg(JobCurvePoint.reward_mean),
        )
        .where(of_job)
        .group_by(bucket)
        .order_by(bucket)
    ).all()
    series = [
        SeriesPoint(step=step, loss=loss, reward_margin=margin, reward_mean=reward)
        for step, loss, margin, reward in rows
    ]
    event = session.scalar(select(JobEvent).where(JobEvent.job_id == job.id, JobEvent.seq == last))
    data = event.data if event else None
    latest = data if isinstance(data, Progress) else None
    return ProgressSeries(points=series, steps_read=count, through=last, latest=latest)
