"""Live job events for any number of streams, from one database read per job and interval.

One task per process polls the jobs that someone is watching, in a worker thread with a
short session, and wakes the streams of a job that has news; a stream holds no
connection between reads (a stream that polled the database itself would make 200
streams 400 queries a second). Streams per user are capped, exactly: a stream's place is
taken before its response starts, on the event loop, so a burst cannot overshoot.
"""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime

from fastapi.concurrency import run_in_threadpool
from loguru import logger
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import TooManyRequests
from app.core.language import Sentence, shown, tr
from app.db.models import Job, JobEvent
from app.db.session import Database
from app.jobs.status import TERMINAL
from app.ml.events import EventData

KEEP_EVENTS = 2000  # recent events kept per watched job, for streams that join late
BATCH = 500
KEEP_ALIVE_S = 15.0
GONE = "gone"  # the job was deleted while watched


@dataclass(frozen=True)
class FeedEvent:
    seq: int
    ts: datetime
    level: str
    message: str  # in English
    said: Sentence | None  # the message, to be read in each reader's language
    data: EventData | None

    def text(self) -> str:
        """The message in the language of the request being answered."""
        return shown(self.said, self.message) or ""


@dataclass(frozen=True)
class Update:
    events: list[FeedEvent]
    status: str
    closing: bool = False  # the service is stopping: this stream ends, the job may not have

    @property
    def final(self) -> bool:
        return self.closing or (
            not self.events and (self.status in TERMINAL or self.status == GONE)
        )


@dataclass
class _Watch:
    job_id: int
    base_seq: int | None = None  # `recent` holds every event after this seq; None: unpolled
    recent: list[FeedEvent] = field(default_factory=list)
    status: str = ""
    version: int = 0
    streams: int = 0
    # Set, and replaced by a fresh one, at each change (no lock: a Condition's lock, taken
    # back while a cancel scope kept cancelling a client that had left, raised "cannot
    # wait on un-acquired lock").
    news: asyncio.Event = field(default_factory=asyncio.Event)

    def touch(self) -> None:
        self.version += 1
        self.news.set()
        self.news = asyncio.Event()

    @property
    def last_seq(self) -> int:
        return self.recent[-1].seq if self.recent else (self.base_seq or 0)


@dataclass
class StreamSlot:
    """One of a user's live streams, counted from before its response starts."""

    feed: "JobFeed"
    user_id: int
    released: bool = False

    def release(self) -> None:
        """Give the place back, once (the stream's end and its response's both call it)."""
        if not self.released:
            self.released = True
            self.feed._give_back(self.user_id)


class JobFeed:
    def __init__(self, database: Database, *, poll_seconds: float, max_per_user: int) -> None:
        self.database = database
        self.poll_seconds = poll_seconds
        self.max_per_user = max_per_user
        self._watches: dict[int, _Watch] = {}
        self._per_user: dict[int, int] = {}
        self._poller: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closing = False

    def reserve(self, *, user_id: int) -> "StreamSlot":
        """The user's place for one more stream; TooManyRequests when they hold as many as
        allowed. Taken and counted at once (no await in between), before the response
        starts; given back when the stream ends, or when its response does."""
        held = self._per_user.get(user_id, 0)
        if held >= self.max_per_user:
            raise TooManyRequests(
                tr(
                    "You have {max_per_user} log streams open; close one, or poll GET "
                    "/jobs/{{id}}/logs instead",
                    max_per_user=self.max_per_user,
                ),
                retry_after=5,
            )
        self._per_user[user_id] = held + 1
        return StreamSlot(self, user_id)

    def _give_back(self, user_id: int) -> None:
        self._per_user[user_id] -= 1
        if not self._per_user[user_id]:
            del self._per_user[user_id]

    async def follow(self, *, slot: "StreamSlot", job_id: int, after: int) -> AsyncIterator[Update]:
        """Updates of one job from event `after` on, until the job has ended or is gone."""
        watch = self._watches.setdefault(job_id, _Watch(job_id))
        watch.streams += 1
        self._loop = asyncio.get_running_loop()
        if self._poller is None or self._poller.done():
            self._poller = self._loop.create_task(self._poll_forever())
        try:
            async for update in self._updates(watch, after):
                yield update
        finally:
            watch.streams -= 1
            if not watch.streams:
                self._watches.pop(job_id, None)
            slot.release()

    def close(self) -> None:
        """End every stream now, each with a final update (the service is stopping: without
        this, the server waits for them to end before it stops). Safe from any thread."""
        self.closing = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for watch in list(self._watches.values()):
            watch.touch()

    async def _updates(self, watch: _Watch, cursor: int) -> AsyncIterator[Update]:
        while True:
            if self.closing:
                yield Update([], watch.status, closing=True)
                return
            seen = watch.version
            if watch.base_seq is not None and cursor >= watch.base_seq:
                update = Update([e for e in watch.recent if e.seq > cursor], watch.status)
            else:  # a backlog older than what is kept here
                update = await run_in_threadpool(self._read, watch.job_id, cursor)
            if update.events:
                cursor = update.events[-1].seq
            yield update
            if update.final:
                return
            if len(update.events) >= BATCH:
                continue  # more of the backlog: no wait
            await _news_since(watch, seen)

    async def _poll_forever(self) -> None:
        while self._watches:
            watches = list(self._watches.values())
            try:
                news = await run_in_threadpool(
                    self._poll, [(w.job_id, w.base_seq is None, w.last_seq) for w in watches]
                )
            except Exception:  # noqa: BLE001  (a database hiccup must not end every stream)
                logger.exception("Polling job events failed; trying again")
                await asyncio.sleep(self.poll_seconds * 4)
                continue
            for watch in watches:
                first, events, status = news[watch.job_id]
                if first is not None:
                    watch.base_seq = first
                if first is None and not events and status == watch.status:
                    continue
                watch.recent = (watch.recent + events)[-KEEP_EVENTS:]
                if watch.recent:
                    watch.base_seq = max(watch.base_seq or 0, watch.recent[0].seq - 1)
                watch.status = status
                watch.touch()
            await asyncio.sleep(self.poll_seconds)

    def _poll(
        self, cursors: list[tuple[int, bool, int]]
    ) -> dict[int, tuple[int | None, list[FeedEvent], str]]:
        """For each watched job: where a new watch starts, the events since, the status."""
        with self.database.session() as session:
            ids = [job_id for job_id, _, _ in cursors]
            rows = session.execute(select(Job.id, Job.status).where(Job.id.in_(ids)))
            statuses: dict[int, str] = dict(rows.all())  # a Result itself has keys()
            news: dict[int, tuple[int | None, list[FeedEvent], str]] = {}
            for job_id, new, after in cursors:
                status = statuses.get(job_id, GONE)
                if new:  # a new watch follows from the newest event on
                    last = session.scalar(
                        select(func.max(JobEvent.seq)).where(JobEvent.job_id == job_id)
                    )
                    news[job_id] = (last or 0, [], status)
                else:
                    news[job_id] = (None, _events(session, job_id, after), status)
            return news

    def _read(self, job_id: int, after: int) -> Update:
        with self.database.session() as session:
            job = session.get(Job, job_id)
            return Update(_events(session, job_id, after), job.status if job else GONE)


async def _news_since(watch: _Watch, version: int) -> None:
    """Until the watch has moved past `version`, or the keep-alive interval has passed."""
    if watch.version != version:
        return
    try:  # the event now is the one the next change sets: nothing ran since the check
        await asyncio.wait_for(watch.news.wait(), KEEP_ALIVE_S)
    except TimeoutError:
        pass  # nothing new: the caller sends a keep-alive


def _events(session: Session, job_id: int, after: int) -> list[FeedEvent]:
    rows = session.scalars(
        select(JobEvent)
        .where(JobEvent.job_id == job_id, JobEvent.seq > after)
        .order_by(JobEvent.seq)
        .limit(BATCH)
    )
    return [FeedEvent(r.seq, r.ts, r.level, r.message, r.said, r.data) for r in rows]
