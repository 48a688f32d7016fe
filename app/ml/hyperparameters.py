"""Turn a job's requested hyperparameters ("auto" or a value) into the ones it trains with."""

import math
from dataclasses import asdict, dataclass
from typing import Any

AUTO = "auto"
DEFAULT_EFFECTIVE_BATCH = 8


@dataclass(frozen=True)
class Hyperparameters:
    epochs: int
    max_steps: int | None
    learning_rate: float
    effective_batch_size: int  # examples per optimizer step
    micro_batch_size: int | None  # examples per forward pass; None: the memory plan decides
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    lora_target_modules: str | list[str]
    max_seq_length: int
    validation_split: float
    seed: int
    precision: str
    gradient_checkpointing: str  # auto | true | false

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _given(requested: dict[str, Any], key: str) -> Any:
    value = requested.get(key, AUTO)
    return None if value is None or value == AUTO else value


def resolve(
    requested: dict[str, Any],
    *,
    num_train_examples: int,
    longest_example_tokens: int,
    model_max_positions: int,
    recommended: dict[str, Any],
) -> Hyperparameters:
    micro = _given(requested, "batch_size")
    accumulation = _given(requested, "gradient_accumulation_steps")
    if _given(requested, "effective_batch_size"):  # `qatune train --batch-size`
        effective = int(requested["effective_batch_size"])
    elif micro and accumulation:
        effective = micro * accumulation
    elif micro:
        effective = max(micro, DEFAULT_EFFECTIVE_BATCH // micro * micro)
    elif accumulation:
        effective = max(accumulation, DEFAULT_EFFECTIVE_BATCH)
    else:
        effective = DEFAULT_EFFECTIVE_BATCH
    effective = min(effective, max(1, num_train_examples))

    epochs = _given(requested, "epochs")
    if epochs is None:
        # Small QA sets need many passes to be learnt; large ones need few.
        target = recommended.get("examples_seen", 300)
        epochs = min(30, max(3, math.ceil(target / max(1, num_train_examples))))

    lora_r = _given(requested, "lora_r") or recommended.get("lora_r", 16)
    dropout = _given(requested, "lora_dropout")
    if dropout is None:
        # LoRA dropout draws a random mask over every LoRA input: measured 30% of a CPU
        # training step (docs/benchmarks.md). Off unless asked for or the model says so.
        dropout = recommended.get("lora_dropout", 0.0)
    split = _given(requested, "validation_split")
    if split is None:
        split = 0.1 if num_train_examples >= 100 else 0.0
    max_len = _given(requested, "max_seq_length") or min(
        longest_example_tokens, model_max_positions, 4096
    )
    return Hyperparameters(
        epochs=int(epochs),
        max_steps=requested.get("max_steps"),
        learning_rate=float(
            _given(requested, "learning_rate") or recommended.get("learning_rate", 2e-4)
        ),
        effective_batch_size=int(effective),
        micro_batch_size=micro,
        lora_r=int(lora_r),
        lora_alpha=int(_given(requested, "lora_alpha") or 2 * lora_r),
        lora_dropout=float(dropout),
        lora_target_modules=requested.get("lora_target_modules") or "all-linear",
        max_seq_length=int(min(max_len, model_max_positions)),
        validation_split=float(split),
        seed=int(requested.get("seed", 42)),
        precision=str(requested.get("precision", AUTO)),
        gradient_checkpointing=str(requested.get("gradient_checkpointing", AUTO)).lower(),
    )
