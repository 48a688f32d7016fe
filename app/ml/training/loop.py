"""The optimizer loop: a fixed schedule of examples per step, packed micro-batches, progress
reports, and out-of-memory back-off (halve the micro-batch, then checkpoint activations,
keeping the effective batch)."""

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from app.ml.data import Example, answer_loss_sum, micro_batches
from app.ml.device import PrecisionDecision
from app.ml.events import OutOfMemory, Progress, Started, TrainingEvent
from app.ml.generation import autocast_for
from app.ml.hyperparameters import ResolvedHyperparameters
from app.ml.memory import is_out_of_memory, memory_snapshot, release_memory
from app.ml.planner import MemoryPlan
from app.ml.training.model_setup import enable_checkpointing

MAX_OOM_RETRIES = 4
PROGRESS_EVERY_S = 1.0


class TrainingCancelled(Exception):
    """should_stop() said so; nothing was saved."""


class TrainingFailed(Exception):
    """A failure the user can act on; the message says how."""


@dataclass
class LoopResult:
    steps: int
    steps_per_epoch: int
    train_tokens: int  # the examples' own tokens, once per pass
    computed_tokens: int  # tokens the model ran on: padding in, a shared prefix once
    seconds: float
    losses: list[float] = field(default_factory=list)


def step_schedule(
    examples: list[Example], batch_size: int, seed: int, total_steps: int
) -> list[list[Example]]:
    """The examples of each optimizer step: a fresh shuffle every epoch, fixed by the seed."""
    rng = random.Random(seed)
    schedule: list[list[Example]] = []
    while len(schedule) < total_steps:
        order = examples[:]
        rng.shuffle(order)
        schedule.extend(order[i : i + batch_size] for i in range(0, len(order), batch_size))
    return schedule[:total_steps]


class TrainingLoop:
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        examples: list[Example],
        *,
        params: ResolvedHyperparameters,
        plan: MemoryPlan,
        device: str,
        precision: PrecisionDecision,
        flat: bool,
        emit: Callable[[TrainingEvent], None],
        should_stop: Callable[[], bool],
    ) -> None:
        self.model = model
        self.examples = examples
        self.params = params
        self.plan = plan
        self.device = device
        self.precision = precision
        self.flat = flat
        self.emit = emit
        self.should_stop = should_stop
        self.pad_id = int(tokenizer.pad_token_id)
        self.steps_per_epoch = math.ceil(len(examples) / params.batch_size)
        self.total_steps = self.steps_per_epoch * params.epochs
        if params.max_steps:
            self.total_steps = min(self.total_steps, params.max_steps)
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            trainable,
            lr=params.learning_rate,
            weight_decay=0.0,
            # One fused kernel over all LoRA tensors: measured 4x faster than the default
            # per-tensor loop on the CPU (1.2 vs 5.0 ms a step on the 23M shape).
            fused=True if device in ("cuda", "cpu") else None,
            foreach=True if device == "mps" else None,
        )
        total = self.total_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda step: max(0.0, 1.0 - step / total),  # linear decay, no warm-up
        )
        self.scaler = torch.amp.GradScaler(device) if precision.loss_scaling else None
        self.micro_tokens = plan.micro_batch_tokens
        if plan.gradient_checkpointing:
            enable_checkpointing(model)

    def run(self) -> LoopResult:
        params = self.params
        self.emit(
            TrainingEvent(
                "INFO",
                f"Training {len(self.examples)} examples for {params.epochs} epoch(s): "
                f"{self.total_steps} steps of {params.batch_size} examples, "
                f"lr {params.learning_rate:g}",
                Started(total_steps=self.total_steps, examples=len(self.examples)),
            )
        )
        schedule = step_schedule(self.examples, params.batch_size, params.seed, self.total_steps)
        self.model.train()
        result = LoopResult(0, self.steps_per_epoch, 0, 0, 0.0)
        started = last_report = time.perf_counter()
        oom_retries = 0
        while result.steps < self.total_steps:
            try:
                loss, real, computed = self.optimizer_step(schedule[result.steps])
            except RuntimeError as exc:  # OutOfMemoryError is a RuntimeError
                if not is_out_of_memory(exc):
                    raise
                oom_message = str(exc).splitlines()[0][:300]
            else:
                self.scheduler.step()
                result.steps += 1
                result.losses.append(loss)
                result.train_tokens += real
                result.computed_tokens += computed
                now = time.perf_counter()
                if now - last_report >= PROGRESS_EVERY_S or result.steps in (1, self.total_steps):
                    last_report = now
                    result.seconds = now - started
                    self._report(result, loss)
                continue
            # Outside the except block, so the exception's frames (and tensors) are freed.
            self.optimizer.zero_grad(set_to_none=True)
            release_memory(self.device)
            oom_retries += 1
            self._back_off(oom_message, oom_retries)
        result.seconds = time.perf_counter() - started
        return result

    def optimizer_step(self, examples: list[Example]) -> tuple[float, int, int]:
        """One optimizer step; the loss is the mean over all answer tokens of the step."""
        batches = micro_batches(
            examples,
            row_tokens=self.plan.row_tokens,
            micro_batch_tokens=self.micro_tokens,
            pad_id=self.pad_id,
            flat=self.flat,
        )
        answer_tokens = sum(len(b.targets) for b in batches)
        total_loss = 0.0
        for batch in batches:
            if self.should_stop():
                raise TrainingCancelled()
            batch = batch.to(self.device)
            with autocast_for(self.device, self.precision.precision):
                loss = answer_loss_sum(self.model, batch) / answer_tokens
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            total_loss += loss.item()
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return (
            total_loss,
            sum(b.real_tokens for b in batches),
            sum(b.computed_tokens for b in batches),
        )

    def _report(self, result: LoopResult, loss: float) -> None:
        step, total = result.steps, self.total_steps
        eta = result.seconds / step * (total - step)
        speed = result.train_tokens / result.seconds if result.seconds else 0.0
        progress = Progress(
            step=step,
            total_steps=total,
            epoch=round(step / self.steps_per_epoch, 3),
            loss=round(loss, 5),
            learning_rate=self.scheduler.get_last_lr()[0],
            tokens_per_second=round(speed, 1),
            eta_seconds=round(eta, 1),
            memory=memory_snapshot(self.device),
        )
        self.emit(
            TrainingEvent(
                "INFO",
                f"step {step}/{total} epoch {progress.epoch:.2f} loss {loss:.4f} "
                f"{speed:,.0f} tok/s ETA {eta:.0f}s",
                progress,
            )
        )

    def _back_off(self, message: str, retries: int) -> None:
        """After an out-of-memory error: halve the micro-batch, then checkpoint, then give up."""
        snapshot = memory_snapshot(self.device)
        if retries > MAX_OOM_RETRIES:
            raise TrainingFailed(
                f"Out of memory on {self.device} even with micro-batches of {self.micro_tokens} "
                f"tokens and gradient checkpointing ({message}; RSS {snapshot.rss_mb} MB). "
                "Use a smaller base model, a lower max_seq_length or lora_r, or close other "
                "programs"
            )
        if self.micro_tokens > self.plan.row_tokens:
            new_tokens = max(self.plan.row_tokens, self.micro_tokens // 2)
            change = f"micro-batch {self.micro_tokens} → {new_tokens} tokens"
        else:
            new_tokens = self.micro_tokens
            enable_checkpointing(self.model)
            change = "gradient checkpointing on"
        self.emit(
            TrainingEvent(
                "WARNING",
                f"Out of memory ({message}); retrying the step with {change} "
                f"(effective batch unchanged, retry {retries}/{MAX_OOM_RETRIES})",
                OutOfMemory(retry=retries, micro_batch_tokens=new_tokens, memory=snapshot),
            )
        )
        self.micro_tokens = new_tokens
