"""GET /metrics: what an operator graphs and alerts on, in Prometheus' text format.

Request latency is measured as requests pass (api/request_timer.py); everything else is
read when Prometheus scrapes: jobs by status and the queue from the database (so every
API process behind a load balancer reports the same numbers), training speed and worker
heartbeats from the running jobs, and each inference engine's queue and tokens.
"""

from collections.abc import Callable, Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from app.core.disk import DiskLevel, DiskState
from app.db.base import utcnow
from app.db.models import Job
from app.db.session import Database
from app.jobs.status import JobStatus
from app.ml.serving.requests import EngineStats

EngineSource = Callable[[], list[EngineStats]]  # each loaded engine's figures
WorkerProbe = Callable[[], bool]  # is this process's embedded worker alive
SlotProbe = Callable[[], int]  # jobs its executor can run at once (0: none, or no worker)
DiskProbe = Callable[[], DiskState]  # the data directory's disk now

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServiceMetrics:
    """One registry per service (not prometheus_client's global one: tests make many)."""

    def __init__(self, collector: "StateCollector") -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.request_seconds = Histogram(
            "qatune_http_request_duration_seconds",
            "Time from a request's arrival to its response's start, by route template",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(collector)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.request_seconds.labels(method, route, str(status)).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class StateCollector(Collector):
    """Read at scrape time from the database and the running engines."""

    def __init__(
        self,
        database: Database,
        engines: EngineSource,
        embedded_worker: WorkerProbe,
        slots: SlotProbe = lambda: 0,
        *,
        disk: DiskProbe,
    ) -> None:
        self.database = database
        self.engines = engines
        self.embedded_worker = embedded_worker
        self.slots = slots
        self.disk = disk

    def collect(self) -> Iterator[Metric]:
        now = utcnow()
        with self.database.session() as session:
            counts = dict(
                session.execute(select(Job.status, func.count()).group_by(Job.status)).all()
            )
            oldest_queued = session.scalar(
                select(func.min(Job.created_at)).where(Job.status == JobStatus.QUEUED)
            )
            started = session.execute(
                select(Job.created_at, Job.started_at).where(Job.started_at.is_not(None))
            ).all()
            waits = [_seconds(start, created) for created, start in started if start is not None]
            running = session.scalars(select(Job).where(Job.status == JobStatus.RUNNING)).all()
            beats = [(job.worker_id or "unknown", job.id, job.heartbeat_at) for job in running]
            speeds = [job.metrics.tokens_per_second or 0.0 for job in running]

        jobs = GaugeMetricFamily("qatune_jobs", "Jobs by status", labels=["status"])
        for job_status in JobStatus:
            jobs.add_metric([job_status.value], counts.get(job_status, 0))
        yield jobs
        queued = counts.get(JobStatus.QUEUED, 0)
        yield GaugeMetricFamily("qatune_queue_length", "Jobs waiting for a worker", value=queued)
        yield GaugeMetricFamily(
            "qatune_queue_oldest_wait_seconds",
            "How long the oldest queued job has waited (0: none waits)",
            value=_seconds(now, oldest_queued) if oldest_queued else 0.0,
        )
        yield SummaryMetricFamily(
            "qatune_job_queue_wait_seconds",
            "Time from a job's creation to its start, over every job that started",
            count_value=len(waits),
            sum_value=sum(waits),
        )
        yield GaugeMetricFamily(
            "qatune_training_tokens_per_second",
            "Real (unpadded) tokens per second of the jobs training now, summed",
            value=sum(speeds),
        )
        heartbeats = GaugeMetricFamily(
            "qatune_worker_heartbeat_age_seconds",
            "Seconds since the last heartbeat of each running job, by its worker",
            labels=["worker", "job"],  # one worker runs several jobs with the Ray executor
        )
        for worker, job_id, beat in beats:
            age = _seconds(now, beat) if beat else float("inf")
            heartbeats.add_metric([worker, str(job_id)], age)
        yield heartbeats
        yield GaugeMetricFamily(
            "qatune_embedded_worker_up",
            "1 if this API process runs the embedded worker and its thread is alive",
            value=1.0 if self.embedded_worker() else 0.0,
        )
        yield GaugeMetricFamily(
            "qatune_executor_slots",
            "Jobs this process's worker can train at once: 1 locally, the Ray cluster's "
            "qatune_slot total with Ray (0: no worker here, or the cluster is unreachable)",
            value=self.slots(),
        )
        yield from _disk_metrics(self.disk())
        yield from _engine_metrics(self.engines())


def _disk_metrics(disk: DiskState) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "qatune_disk_free_bytes", "Free space on the data directory's disk", value=disk.free_bytes
    )
    yield GaugeMetricFamily(
        "qatune_disk_total_bytes", "Size of the data directory's disk", value=disk.total_bytes
    )
    yield GaugeMetricFamily(
        "qatune_disk_low_threshold_bytes",
        "QATUNE_DISK_LOW_MB: free space below which the service warns",
        value=disk.low_below_bytes,
    )
    yield GaugeMetricFamily(
        "qatune_disk_state",
        "0: room; 1: low (free space under the threshold); 2: full (writes fail)",
        value={DiskLevel.OK: 0, DiskLevel.LOW: 1, DiskLevel.FULL: 2}[disk.level],
    )


def _engine_metrics(engines: list[EngineStats]) -> Iterator[Metric]:
    labels = ["base_model"]
    running = GaugeMetricFamily("qatune_inference_running", "Requests being decoded", labels=labels)
    waiting = GaugeMetricFamily(
        "qatune_inference_waiting", "Requests queued for a decoding slot", labels=labels
    )
    adapters = GaugeMetricFamily(
        "qatune_inference_adapters_loaded", "Adapters loaded", labels=labels
    )
    tokens = CounterMetricFamily(
        "qatune_inference_generated_tokens",
        "Tokens generated, counted as each request finishes (rate() gives tokens/s)",
        labels=labels,
    )
    finished = CounterMetricFamily(
        "qatune_inference_requests", "Generation requests finished", labels=labels
    )
    replicas_up = GaugeMetricFamily(
        "qatune_inference_replicas_up",
        "vLLM servers of the base model that answer (QATUNE_SERVING_BACKEND=vllm)",
        labels=labels,
    )
    for stats in engines:
        if stats.backend == "vllm":
            replicas_up.add_metric([stats.base_model], sum(r.up for r in stats.replicas))
        running.add_metric([stats.base_model], stats.running)
        waiting.add_metric([stats.base_model], stats.waiting)
        adapters.add_metric([stats.base_model], len(stats.adapters))
        tokens.add_metric([stats.base_model], stats.generated_tokens)
        finished.add_metric([stats.base_model], stats.finished_requests)
    yield from (running, waiting, adapters, tokens, finished, replicas_up)


def _seconds(later: datetime, earlier: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds())
