"""ModelTrainer: one LoRA fine-tuning run, from QA pairs to a saved adapter.

Used by the worker's training child and by `qatune train`. It knows nothing of the
database or HTTP: it reports typed events through `on_event` and checks `should_stop`
between micro-batches for a prompt cancel. The pieces it orchestrates each live in a
module of their own: the model (model_setup), the optimizer loop (loop), the forgetting
meter (forgetting), evaluation (after_loop) and the adapter's files.
"""

import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Literal

import torch

from app.core.language import said, verbatim
from app.ml.cpu_share import CpuShare
from app.ml.data import (
    Example,
    data_facts,
    encode_pair,
    encode_pairs,
    fit_to_length,
    split_examples,
)
from app.ml.device import PrecisionDecision
from app.ml.events import (
    DeviceChosen,
    MemoryReport,
    Note,
    Planned,
    StopRequest,
    TrainingEvent,
)
from app.ml.gguf_bases import source_of
from app.ml.hyperparameters import ResolvedHyperparameters, knowing
from app.ml.memory import heap_kept_between_steps, memory_snapshot, release_memory
from app.ml.models import ModelFacts, load_tokenizer, read_model_facts, resolve_model_dir
from app.ml.pairs import QAPair, shared_system_prompt
from app.ml.planner import TrainingPlan, plan_training
from app.ml.quantization import QuantizationUnavailable
from app.ml.training import log_lines
from app.ml.training.adapter_files import commit_adapter, stage_adapter
from app.ml.training.adapter_metadata import AdapterMetadata, now_iso
from app.ml.training.after_loop import TableRun, evaluate_kept_weights
from app.ml.training.checkpoints import Checkpointer
from app.ml.training.data_parallel import (
    Replicas,
    rendezvous_address,
    start_helpers,
    stop_helpers,
)
from app.ml.training.forgetting import ForgettingMeter, pairs_to_keep
from app.ml.training.keeping import Knowledge, meter_examples, replay_examples
from app.ml.training.loop import TrainingLoop
from app.ml.training.metrics import TrainingMetrics, run_metrics
from app.ml.training.model_card import data_fingerprint, model_card
from app.ml.training.model_setup import (
    LoraSetupFailed,
    TrainableModel,
    load_trainable_model,
)
from app.ml.training.preference import PreferenceLoop
from app.ml.training.reinforcement import ReinforcementLoop, reinforcement_for
from app.ml.training.request import Replica, TrainingRequest
from app.ml.training.stops import TrainingFailed

EventSink = Callable[[TrainingEvent], None]


@dataclass(frozen=True)
class Base:
    """The base model as the run reads it."""

    directory: Path
    tokenizer: Any
    facts: ModelFacts


@dataclass
class Prepared:
    """What the plan made of the request: the resolved values, the examples split."""

    plan: TrainingPlan
    train_pairs: list[QAPair]
    val_pairs: list[QAPair]
    examples: list[Example]
    validation: list[Example]
    # The answers of the model this job trains further, whole: trained beside the job (cut
    # to its length) and counted at its end
    starting: list[Example]


@dataclass
class TrainingResult:
    adapter_dir: Path
    metrics: TrainingMetrics
    hyperparameters: ResolvedHyperparameters


def _log_only(event: TrainingEvent) -> None:
    from loguru import logger

    logger.log(event.level, "{}", event.message.english())


class ModelTrainer:
    def __init__(
        self,
        request: TrainingRequest,
        *,
        on_event: EventSink = _log_only,
        should_stop: Callable[[], StopRequest | None] = lambda: None,
    ) -> None:
        self.request = request
        self.emit = on_event
        self.should_stop = should_stop
        self.cpu_share: CpuShare | None = None

    def run(self) -> TrainingResult:
        """The run, phase by phase: device, base, plan, model, training, saving."""
        self._report_memory("before")
        precision = self._device_and_precision()
        base = self._read_base()
        prepared = self._plan(base, precision)
        trainable = self._load_trainable(base, prepared, precision)
        try:
            return self._train_and_save(base, prepared, trainable)
        finally:
            del trainable  # the model's memory goes back before the figures are taken
            self._report_memory("after")

    def _report_memory(self, when: Literal["before", "after"]) -> None:
        device = self.request.device_plan.device
        release_memory(device, new_peak=when == "before")
        said_when = (
            said("Memory before the job") if when == "before" else said("Memory after the job")
        )
        snapshot = memory_snapshot() if when == "before" else memory_snapshot(device)
        self.emit(TrainingEvent("INFO", said_when, MemoryReport(when=when, memory=snapshot)))

    def _device_and_precision(self) -> PrecisionDecision:
        """The precision this run computes in, the device checked, its threads set."""
        request, device_plan = self.request, self.request.device_plan
        device = device_plan.device
        try:
            precision = device_plan.precision_for(request.hyperparameters.precision)
        except ValueError as exc:
            raise TrainingFailed(said("precision: {why}", why=str(exc))) from exc
        try:
            asked = request.hyperparameters
            device_plan.quantization.check(
                asked.quantization, device=device, processes=asked.process_count
            )
        except QuantizationUnavailable as exc:
            raise TrainingFailed(said("quantization: {why}", why=str(exc))) from exc
        self.emit(
            TrainingEvent(
                "INFO",
                log_lines.device_chosen(
                    device, list(device_plan.device_reasons), precision.precision, precision.reason
                ),
                DeviceChosen(
                    device=device,
                    dtype=precision.precision,
                    reasons=[r.english() for r in (*device_plan.device_reasons, precision.reason)],
                ),
            )
        )
        if request.replica and device == "cuda":  # one GPU a process, before anything loads
            torch.cuda.set_device(request.replica.rank)
        if device == "cpu" and request.cpu_threads:
            torch.set_num_threads(request.cpu_threads)
        elif device == "cpu":  # physical cores, minus those other programs keep busy
            self.cpu_share = CpuShare(device_plan.capabilities.cpu_count)
        return precision

    def _read_base(self) -> Base:
        request = self.request
        directory = resolve_model_dir(
            request.base_model,
            cache_dir=request.model_cache_dir,
            offline=request.offline,
            configured=request.configured_models,
            precision=request.device_plan.precision,
        )
        return Base(directory, load_tokenizer(directory), read_model_facts(directory))

    def _plan(self, base: Base, precision: PrecisionDecision) -> Prepared:
        """The resolved hyperparameters and memory plan, and the examples split by them."""
        request, device_plan = self.request, self.request.device_plan
        tokenizer, shape = base.tokenizer, base.facts.shape
        encoded, _ = encode_pairs(tokenizer, request.pairs, shape.max_positions)
        plan = plan_training(
            request.hyperparameters,
            data=replace(data_facts(encoded), reinforcement=request.grader is not None),
            shape=shape,
            recommended=base.facts.recommended,
            device=device_plan.device,
            precision=precision,
            budget_gb=device_plan.memory_budget_gb,
            budget_reason=device_plan.budget_reason.english(),
            resolved=request.resolved,
            devices=device_plan.devices,
            quantizations=device_plan.quantization.kinds,
        )
        params, memory = plan.hyperparameters, plan.memory
        split = split_examples(
            tokenizer, request.pairs, encoded, request.validation_pairs, params, shape
        )
        train_pairs, val_pairs, examples, validation, cut = split
        if cut:
            self.emit(
                TrainingEvent(
                    "WARNING",
                    log_lines.cut(cut, params.max_seq_length),
                    Note(topic="cut", values={"cut": cut}),
                )
            )
        if not examples:
            raise TrainingFailed(said("No example fits max_seq_length; raise max_seq_length"))
        self.emit(
            TrainingEvent(
                "INFO",
                said("Memory plan: {summary}", summary=memory.summary()),
                Planned(hyperparameters=params, plan=memory),
            )
        )
        if not memory.fits:
            raise TrainingFailed(memory.refusal())
        keep = pairs_to_keep(self.request)
        starting, _ = fit_to_length(
            [replace(encode_pair(tokenizer, pair), replay=True) for pair in keep],
            shape.max_positions,
        )
        return Prepared(plan, train_pairs, val_pairs, examples, validation, starting)

    def _load_trainable(
        self, base: Base, prepared: Prepared, precision: PrecisionDecision
    ) -> TrainableModel:
        params = prepared.plan.hyperparameters
        torch.manual_seed(params.seed)
        try:
            trainable = load_trainable_model(
                base.directory,
                device=self.request.device_plan.device,
                precision=precision.precision,
                params=params,
                emit=self.emit,
                start=self.request.start,
            )
        except LoraSetupFailed as exc:
            raise TrainingFailed(verbatim(str(exc))) from exc
        if params.quantization != "none" and not trainable.quantized:  # nothing to quantize
            params = replace(params, quantization="none")
            prepared.plan = replace(prepared.plan, hyperparameters=params)
        return trainable

    def _train_and_save(
        self, base: Base, prepared: Prepared, trainable: TrainableModel
    ) -> TrainingResult:
        request, plan = self.request, prepared.plan
        params = plan.hyperparameters
        metadata = self._metadata(base, prepared)
        replica, helpers = request.replica, []
        if params.processes > 1 and replica is None:  # rank 0 of a data-parallel run
            replica = Replica(0, params.processes, rendezvous_address())
            helpers = self._start_helpers(params, plan.memory.device, replica.address)
        replicas: Replicas | None = None
        try:
            if replica is not None:
                replicas = Replicas(replica, plan.memory.device)
            meter = ForgettingMeter(request, base.directory, base.tokenizer, self.emit)
            knowledge = meter.before(trainable, plan)
            known = knowing(params, request.hyperparameters, knows_anything=knowledge.any)
            if known != params:
                params = known
                prepared.plan = plan = replace(plan, hyperparameters=params)
                metadata = self._metadata(base, prepared)
            # Reinforcement keeps by its KL term to where it started, not by answers beside
            beside = params.method != "reinforcement"
            with heap_kept_between_steps():
                metrics, loop = self._train(
                    trainable,
                    base.tokenizer,
                    prepared.examples,
                    prepared.validation,
                    plan,
                    metadata,
                    replicas,
                    fit_to_length(prepared.starting, params.max_seq_length)[0] if beside else [],
                    replay_examples(base.tokenizer, knowledge, params.max_seq_length)
                    if params.replay and beside
                    else [],
                    meter_examples(base.tokenizer, knowledge),
                )
            if loop is None:  # a data-parallel helper: rank 0 saves the adapter
                return TrainingResult(request.output_dir, metrics, params)
            return self._evaluate_and_save(
                base, prepared, trainable, loop, metrics, metadata, meter, knowledge
            )
        finally:
            if replicas:
                replicas.close()
            stop_helpers(helpers)

    def _metadata(self, base: Base, prepared: Prepared) -> AdapterMetadata:
        request = self.request
        source = source_of(base.directory)
        return AdapterMetadata(
            base_model=request.base_model,
            system_prompt=shared_system_prompt(request.pairs),
            hyperparameters=prepared.plan.hyperparameters.as_dict(),
            plan=prepared.plan.memory.as_dict(),
            created_at=now_iso(),
            longest_answer_tokens=max(e.answer_tokens for e in prepared.examples),
            started_from=request.start.model if request.start else None,
            base_source=asdict(source) if source else None,
        )

    def _evaluate_and_save(
        self,
        base: Base,
        prepared: Prepared,
        trainable: TrainableModel,
        loop: TrainingLoop,
        metrics: TrainingMetrics,
        metadata: AdapterMetadata,
        meter: ForgettingMeter,
        knowledge: Knowledge,
    ) -> TrainingResult:
        """The answer table on the weights the run keeps and the forgetting meter's final
        reading, then the adapter, its metadata, evaluation and card, written aside and
        renamed into place."""
        request = self.request
        staging = stage_adapter(trainable.model, base.tokenizer, request.output_dir, metadata)
        try:
            metrics, evaluation = evaluate_kept_weights(
                trainable,
                base.tokenizer,
                TableRun(
                    model_dir=base.directory,
                    staging=staging,
                    base_model=request.base_model,
                    base_answers_dir=request.base_answers_dir,
                    cpu_share=self.cpu_share,
                ),
                prepared.val_pairs or prepared.train_pairs,
                validated=bool(prepared.val_pairs),
                plan=prepared.plan,
                loop=loop,
                metrics=metrics,
                emit=self.emit,
            )
            scope = meter.scope(trainable, prepared.plan, knowledge)
            if scope is not None:
                scope.save(staging)
            kept = meter.after(trainable, prepared.plan, knowledge, scope)
            starting = meter.starting_answers(loop, prepared.starting)
            kept_answers, keep_answers = starting or (None, None)
            metrics = replace(
                metrics,
                knowledge_known=kept.known if kept else 0,
                knowledge_kept=kept.kept if kept else None,
                knowledge_alone=kept.alone if kept and scope else None,
                kept_answers=kept_answers,
                keep_answers=keep_answers,
            )
            metadata = replace(metadata, metrics=metrics.as_dict(), created_at=now_iso())
            card = model_card(
                metadata,
                folder=request.adapter_name or request.output_dir.name,
                num_pairs=len(request.pairs),
                data_sha256=data_fingerprint(request.pairs),
                scoped=scope is not None,
            )
            adapter_dir = commit_adapter(
                staging, request.output_dir, metadata, evaluation=evaluation, card=card
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # gone already once committed
        self.emit(TrainingEvent("INFO", said("Adapter saved"), Note(topic="saved")))
        return TrainingResult(adapter_dir, metrics, prepared.plan.hyperparameters)

    def _train(
        self,
        trainable: TrainableModel,
        tokenizer: Any,
        examples: list[Example],
        validation: list[Example],
        plan: TrainingPlan,
        metadata: AdapterMetadata,
        replicas: Replicas | None,
        keep: list[Example],
        replay: list[Example],
        meter: list[Example],
    ) -> tuple[TrainingMetrics, TrainingLoop | None]:
        """The run's figures, and the loop that ended with the weights it keeps (None for a
        data-parallel helper, which neither validates nor saves)."""
        device, precision = plan.memory.device, plan.precision
        helper = replicas is not None and not replicas.is_main
        method = plan.hyperparameters.method
        kind = {
            "supervised": TrainingLoop,
            "dpo": PreferenceLoop,
            "reinforcement": ReinforcementLoop,
        }
        extra: dict[str, Any] = {}
        if method == "reinforcement":  # validated by reward, not by the answers' loss
            extra["reinforcement"] = reinforcement_for(self.request, examples, validation)
            validation = []
        loop = kind[method](
            trainable.model,
            tokenizer,
            examples,
            params=plan.hyperparameters,
            plan=plan.memory,
            device=device,
            precision=precision,
            flat=trainable.flat,
            emit=self.emit,
            should_stop=self.should_stop,
            cpu_share=self.cpu_share,
            validation=[] if helper else validation,
            replicas=replicas,
            **extra,
        )
        loop.replay = replay
        loop.judging.keep, loop.judging.meter = keep, [] if helper else meter
        if self.request.checkpoint_dir is not None:  # None for helpers: rank 0 saves
            # A tenth of the run as expected (auto epochs: not the cap's length)
            expected = loop.judging.expected_end(0)
            loop.checkpointer = Checkpointer(
                self.request.checkpoint_dir, total_steps=expected, metadata=metadata
            )
        done = loop.run(resume_from=self.request.resume_from)
        metrics = replace(
            run_metrics(done, loop.steps_per_epoch, plan.memory.device, precision.precision),
            train_exact_match=loop.judging.learned_fraction,
        )
        stop = loop.watch.stop if isinstance(loop, ReinforcementLoop) else None
        if stop is not None:
            metrics = replace(metrics, reward_stop=stop.kind, reward_stop_step=stop.step)
        return metrics, None if helper else loop

    def _start_helpers(
        self, params: ResolvedHyperparameters, device: str, address: str
    ) -> list[BaseProcess]:
        """Ranks 1.. of a data-parallel run: the same request and resolved values, quiet."""
        backend = "NCCL" if device == "cuda" else "gloo"
        self.emit(
            TrainingEvent(
                "INFO",
                log_lines.data_parallel(params.processes, backend, gpus=device == "cuda"),
                Note(topic="data_parallel", values={"processes": params.processes}),
            )
        )
        helper_request = replace(self.request, resolved=params, checkpoint_dir=None)
        return start_helpers(partial(run_replica, helper_request), params.processes, address)


def run_replica(request: TrainingRequest, replica: Replica) -> None:
    """A data-parallel helper process: train in step with rank 0, report nothing."""
    from app.core.processes import die_with_parent
    from app.ml.training.stops import TrainingCancelled, TrainingPaused

    die_with_parent()
    try:
        ModelTrainer(replace(request, replica=replica), on_event=lambda _: None).run()
    except (TrainingCancelled, TrainingPaused):
        pass  # rank 0 asked every rank to stop
