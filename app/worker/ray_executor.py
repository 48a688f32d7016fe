"""The Ray executor (QATUNE_EXECUTOR=ray): each job a Ray task on a node with a free slot.

Every node that trains advertises slots as a custom resource (`ray start --resources
'{"qatune_slot": 1}'`: one per GPU, or one for a node without a GPU) and each job takes
one, so the single-slot rule holds per device while the cluster runs as many jobs at once
as it has slots. The task runs the same `train()` as the local child, in a Ray worker
process used for this one task (`max_calls=1`: its memory and its CUDA context go back
when it ends).

Nodes need neither the database nor a shared disk. The job's files travel to the node in
the task's arguments; its events, each checkpoint as it is written, and at the end the
adapter and the job's log come back through Ray: events and checkpoints through a small
`JobChannel` actor pinned to the API's node, the adapter as the task's result. Stop
requests go the other way through the same channel; a run that does not stop within the
grace period is cancelled by force, which kills its worker process and frees the device.
A node that dies mid-job ends its task with an error: the job is interrupted and re-queued
by the state machine, and resumes from the last checkpoint that reached the API.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray
from loguru import logger
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from app.core.language import said, verbatim
from app.core.storage import Storage
from app.jobs.outcomes import Interrupted, Outcome, Reported
from app.jobs.spec import TrainingSpec
from app.ml.events import Checkpointed, Note, StopRequest, TrainingEvent
from app.ml.training.checkpoints import KEEP_CHECKPOINTS, checkpoint_dirs, latest_checkpoint
from app.worker.context import WorkerContext
from app.worker.protocol import ChildMessage
from app.worker.supervisor import Worker

SLOT = "qatune_slot"  # the custom resource a training node advertises, one per device
FLUSH_SECONDS = 0.5  # how often a run sends its events (and hears of a stop request)


@dataclass(frozen=True)
class Tree:
    """A directory's files as bytes, to travel through Ray (adapters and checkpoints)."""

    files: dict[str, bytes]

    @classmethod
    def read(cls, directory: Path) -> Tree:
        return cls(
            {
                str(path.relative_to(directory)): path.read_bytes()
                for path in sorted(directory.rglob("*"))
                if path.is_file()
            }
        )

    def write(self, target: Path) -> None:
        """Into `target`, whole or not at all: written aside, then renamed into place."""
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            for name, data in self.files.items():
                path = (staging / name).resolve()
                if not path.is_relative_to(staging.resolve()):  # only ever our own names
                    raise ValueError(f"file outside its directory: {name!r}")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            shutil.rmtree(target, ignore_errors=True)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@dataclass(frozen=True)
class CheckpointFiles:
    """A checkpoint the run has just written, on its way to the API's storage."""

    name: str  # step-000123
    tree: Tree


@dataclass(frozen=True)
class RemoteResult:
    outcome: Reported
    adapter: Tree | None  # the trained adapter, when it succeeded
    log: str  # the run's log on the node, for the job's log file


class JobChannel:
    """One job's mailbox on the API's node: the run's messages in order, a stop request
    the other way. Calls from one caller run in the order they were made."""

    def __init__(self) -> None:
        self._messages: list[ChildMessage | CheckpointFiles] = []
        self._stop: StopRequest | None = None

    def put(self, messages: list[ChildMessage | CheckpointFiles]) -> StopRequest | None:
        self._messages.extend(messages)
        return self._stop

    def take(self) -> list[ChildMessage | CheckpointFiles]:
        messages, self._messages = self._messages, []
        return messages

    def ask(self, request: StopRequest) -> None:
        self._stop = self._stop or request


# ------------------------------------------------------------------------- on the node
class Outbox:
    """The run's side of the channel: events batched every FLUSH_SECONDS, a checkpoint
    sent (before the event that announces it) as soon as it is written."""

    def __init__(self, channel: Any, checkpoint_dir: Path) -> None:
        self.channel = channel
        self.checkpoint_dir = checkpoint_dir
        self.pending: list[ChildMessage | CheckpointFiles] = []
        self.stop: StopRequest | None = None
        self.flushed_at = 0.0

    def emit(self, event: TrainingEvent) -> None:
        logger.log(event.level, "{}", event.message.english())
        if isinstance(event.data, Checkpointed) and (
            checkpoint := latest_checkpoint(self.checkpoint_dir)
        ):
            self.pending += [CheckpointFiles(checkpoint.name, Tree.read(checkpoint)), event]
            self.flush()
        else:
            self.pending.append(event)
            self.flush_if_due()

    def should_stop(self) -> StopRequest | None:
        self.flush_if_due()
        return self.stop

    def flush_if_due(self) -> None:
        if time.monotonic() - self.flushed_at >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        messages, self.pending = self.pending, []
        self.stop = ray.get(self.channel.put.remote(messages))
        self.flushed_at = time.monotonic()


def run_on_node(spec: TrainingSpec, resume: CheckpointFiles | None, channel: Any) -> RemoteResult:
    """The Ray task: the job's files into a temporary directory, the node's model cache and
    its device, chosen as the API chooses its own (its QATUNE_* settings, its benchmark),
    then the same run as the local child."""
    from app.core.config import Settings
    from app.ml.device_benchmark import plan_this_machine

    os.nice(spec.niceness)
    spec.torch_environment.apply()
    settings = Settings()  # this node's: data dir (model cache), device override
    node_id = ray.get_runtime_context().get_node_id()
    with tempfile.TemporaryDirectory(prefix=f"qatune-job-{spec.job_id}-") as scratch:
        work = Path(scratch)
        resume_from = None
        if resume is not None:
            resume_from = work / "checkpoints" / resume.name
            resume.tree.write(resume_from)
        request = replace(
            spec.request,
            output_dir=work / "adapter",
            model_cache_dir=Storage(settings.data_dir).models_dir,
            base_answers_dir=Storage(settings.data_dir).base_answers_dir(
                spec.request.base_answers_dir.name
            )
            if spec.request.base_answers_dir
            else None,
            device_plan=plan_this_machine(settings.device, settings.data_dir),
            checkpoint_dir=work / "checkpoints",
            resume_from=resume_from,
        )
        local = replace(spec, request=request, job_log=work / "job.log", log_dir=work)
        sink = logger.add(local.job_log, level="INFO", encoding="utf-8", diagnose=False)
        outbox = Outbox(channel, work / "checkpoints")
        host = socket.gethostname()
        outbox.emit(
            TrainingEvent(
                "INFO",
                said("Running on Ray node {host} ({node})", host=host, node=node_id[:12]),
                Note(topic="ray_node", values={"node_id": node_id, "host": host}),
            )
        )
        from app.worker.run import train

        outcome = train(local, emit=outbox.emit, should_stop=outbox.should_stop)
        outbox.flush()
        logger.remove(sink)
        adapter = Tree.read(request.output_dir) if request.output_dir.is_dir() else None
        return RemoteResult(outcome, adapter, local.job_log.read_text(errors="replace"))


RUN_ON_NODE = ray.remote(
    num_cpus=0,  # the slot is the unit: the run sizes its own threads to the node
    max_calls=1,  # a fresh worker process a run: its memory goes back when it ends
    max_retries=0,  # a failed run is re-queued by the job state machine, not by Ray
)(run_on_node)
JOB_CHANNEL = ray.remote(num_cpus=0)(JobChannel)


# ----------------------------------------------------------------------- on the API
class RayRun:
    """A job's Ray task as the supervisor sees it."""

    def __init__(self, spec: TrainingSpec, gpus: float) -> None:
        self.spec = spec  # its paths are the API's: where the run's files come back to
        assert spec.request.checkpoint_dir is not None  # a job's run always keeps them
        self.checkpoint_dir = spec.request.checkpoint_dir
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        # An actor handle: Ray's types do not describe its methods' .remote()
        self.channel: Any = JOB_CHANNEL.options(scheduling_strategy=here).remote()
        task = RUN_ON_NODE.options(
            num_gpus=gpus, resources={SLOT: 1}, name=f"qatune-job-{spec.job_id}"
        )
        resume = spec.request.resume_from
        shipped = CheckpointFiles(resume.name, Tree.read(resume)) if resume else None
        self.result = task.remote(spec, shipped, self.channel)
        self._ended = False
        self._error: str | None = None

    def receive(self) -> list[ChildMessage] | None:
        if self._ended:
            return None
        done, _ = ray.wait([self.result], timeout=0.5)
        messages = self._take()
        if done and not messages:  # everything it sent is in: now its result
            self._ended = True
            return self._finish()
        return messages

    def _take(self) -> list[ChildMessage]:
        received: list[ChildMessage] = []
        for message in ray.get(self.channel.take.remote()):
            if isinstance(message, CheckpointFiles):
                # Before the event that announces it: the job's checkpoint_step only ever
                # names a checkpoint the API has.
                message.tree.write(self.checkpoint_dir / message.name)
                for old in checkpoint_dirs(self.checkpoint_dir)[:-KEEP_CHECKPOINTS]:
                    shutil.rmtree(old, ignore_errors=True)
            else:
                received.append(message)
        return received

    def _finish(self) -> list[ChildMessage] | None:
        try:
            result: RemoteResult = ray.get(self.result)
        except ray.exceptions.RayError as exc:  # the node or its worker died, or a kill
            self._error = f"its Ray task ended without a result ({type(exc).__name__})"
            logger.warning("Job {}: {}: {}", self.spec.job_id, self._error, exc)
            return None
        finally:
            ray.kill(self.channel)
        with self.spec.job_log.open("a", encoding="utf-8") as log:
            log.write(result.log)
        if result.adapter is None:
            return [result.outcome]
        result.adapter.write(self.spec.request.output_dir)
        size = sum(len(data) for data in result.adapter.files.values())
        received = TrainingEvent(
            "INFO",
            said("Adapter received from the Ray node ({mb:.1f} MB) and stored", mb=size / 2**20),
        )
        return [received, result.outcome]

    def ask(self, request: StopRequest) -> None:
        self.channel.ask.remote(request)

    def kill(self) -> None:
        ray.cancel(self.result, force=True)

    def silent_end(self) -> Outcome:
        if self._error:
            return Interrupted(verbatim(self._error))
        return Interrupted(said("its Ray task ended without a result"))


class RayWorker(Worker):
    """Claims a job whenever the cluster has a free slot and runs each as a Ray task."""

    runs_on_this_machine = False
    runs_as = "as a Ray task"

    def __init__(self, context: WorkerContext) -> None:
        super().__init__(context)
        self.status = "not connected"

    def connect(self) -> bool:
        """Join the cluster, from the worker's thread: an address that does not answer
        is found by a plain TCP connect first (ray.init would wait minutes for it)."""
        if ray.is_initialized():
            return True
        address = self.settings.ray_address
        try:
            if address != "auto":
                host, _, port = address.removeprefix("ray://").rpartition(":")
                socket.create_connection((host, int(port)), timeout=3).close()
            ray.init(
                address=address,
                namespace="qatune",
                log_to_driver=False,  # the runs' logs come back as events and job logs
                logging_level=logging.WARNING,
            )
        except Exception as exc:  # noqa: BLE001  (any failure: not reachable, said in /ready)
            status = f"unreachable at {address}: {type(exc).__name__}: {exc}"
            if status != self.status:
                logger.error("Ray executor: cluster {}", status)
            self.status = status
            return False
        logger.info("Connected to the Ray cluster at {}", address)
        return True

    def slots(self) -> int:
        if not self.connect():
            return 0
        slots = int(ray.cluster_resources().get(SLOT, 0))
        status = "ok" if slots else f"no node advertises the {SLOT!r} resource"
        if status != self.status:
            logger.log(
                "INFO" if slots else "WARNING", "Ray executor: {} slot(s); {}", slots, status
            )
        self.status = status
        return slots

    def executor_status(self) -> str:
        return self.status if self.status == "ok" else f"ray: {self.status}"

    def launch(self, spec: TrainingSpec) -> RayRun:
        gpus = self.settings.ray_gpus_per_job
        if gpus is None:  # one GPU a job where the cluster has GPUs
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) else 0.0
        return RayRun(spec, gpus)
