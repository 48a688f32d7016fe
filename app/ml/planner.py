"""How much memory a LoRA job needs, and the micro-batch and checkpointing that make it fit.

The estimate adds up what training holds at its peak: the frozen weights, the LoRA
weights with their gradients and AdamW state, the activations kept for the backward pass
(per token, so it scales with the micro-batch), the logits at answer positions, and the
runtime's own overhead. docs/devices.md compares it with measured peaks.
"""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from app.core.language import Sentence, said
from app.ml.activations import (
    BYTES,
    activation_bytes_per_token,
    attention_bytes_per_token,
    largest_step_tokens,
)
from app.ml.device import GIB, Device, PrecisionDecision
from app.ml.hyperparameters import (
    AUTO,
    AUTO_MAX_EPOCHS,
    Auto,
    DataFacts,
    HyperparameterRequest,
    ResolvedHyperparameters,
    resolve,
)
from app.ml.models import Recommended
from app.ml.quantization import LABELS, Quantization, base_weight_bytes
from app.ml.shapes import ModelShape

# torch, python, the CUDA context (on the CPU: imports measured at 0.25-0.36 GiB RSS)
RUNTIME_OVERHEAD_GB = {"cpu": 0.45, "mps": 0.8, "cuda": 0.9}
# A CPU training in bf16 (AVX512-BF16/AMX) held 0.15-0.22 GiB more than its plan whatever
# the model's size and the step's tokens (builtin:tiny, a 126M shape, SmolLM2-135M; the
# same jobs in fp32 on the same machine within 5%): oneDNN's bf16 kernels' own memory
# and the heap they leave (docs/benchmarks.md, "Planner accuracy").
CPU_BF16_RUNTIME_EXTRA_GB = 0.2
MIN_ROW_TOKENS = 256
MAX_MICRO_BATCH_TOKENS = 16_384
# Logits the fused LM head + loss (fused.py) holds at once: ~16 MB in bf16, measured faster
# than one big chunk; at least 96 rows so that each chunk's matmul stays compute-bound (64
# rows ran 1.2x slower on Qwen's 151,936-token head). 96 rows of that head are 29 MB, under
# glibc's 32 MiB mmap ceiling: the kept heap (memory.py) serves them, where 128 rows took
# fresh pages for every chunk, ~57,000 page faults a step on the 0.5B shape.
LOSS_CHUNK_ELEMENTS = 1 << 23
LOSS_CHUNK_MIN_ROWS = 96


# DPO and GRPO train on each answer token's log-probability (answer_loss.py): the logits
# of this many tokens exist at once, in fp32, with their log-softmax and, in the backward,
# the gradients of both: four vocabulary-wide tensors a row.
LOGPS_ROWS = 512
LOGPS_TENSORS = 4
MAX_CAP_FACTOR = 2  # auto epochs: a run still learning at its cap goes on to twice it


def loss_chunk_rows(vocab_size: int) -> int:
    return max(LOSS_CHUNK_MIN_ROWS, LOSS_CHUNK_ELEMENTS // vocab_size)


@dataclass
class MemoryPlan:
    fits: bool
    device: str
    precision: str
    estimated_peak_gb: float
    memory_budget_gb: float
    micro_batch_size: int
    gradient_accumulation_steps: int
    gradient_checkpointing: bool
    micro_batch_tokens: int
    row_tokens: int
    breakdown_gb: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    quantization: Quantization = "none"  # the frozen base's
    # The micro-batch was cut or checkpointing turned on to fit the budget
    cut_to_fit: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> Sentence:
        return said(
            "peak ≈ {peak:.2f} GB of {budget:.1f} GB ({device}, {precision}{base}); micro-batch "
            "{tokens} tokens (~{examples} examples) × {steps}, checkpointing {checkpointing}",
            peak=self.estimated_peak_gb,
            budget=self.memory_budget_gb,
            device=self.device,
            precision=self.precision,
            base=self._base(),
            tokens=self.micro_batch_tokens,
            examples=self.micro_batch_size,
            steps=self.gradient_accumulation_steps,
            checkpointing=said("on") if self.gradient_checkpointing else said("off"),
        )

    def _base(self) -> Sentence | str:
        if self.quantization == "none":
            return ""
        return said(", {label} base", label=LABELS[self.quantization])

    def refusal(self) -> Sentence:
        """Why the job cannot train here and what to change (read in the reader's language)."""
        needs = (
            said("{gb:.1f} GB", gb=self.estimated_peak_gb)
            if self.quantization == "none"
            else said(
                "{gb:.1f} GB on a {label} base",
                gb=self.estimated_peak_gb,
                label=LABELS[self.quantization],
            )
        )
        smaller = said("a 4-bit base (quantization 4bit), ") if self.quantization != "4bit" else ""
        return said(
            "Does not fit: needs about {needs} but {device} has a budget of {budget:.1f} GB "
            "even with one example per micro-batch and gradient checkpointing. Use a smaller "
            "base model (e.g. Qwen/Qwen2.5-0.5B-Instruct), a lower max_seq_length, {smaller}or "
            "a machine with more memory",
            needs=needs,
            device=self.device,
            budget=self.memory_budget_gb,
            smaller=smaller,
        )


def plan_memory(
    *,
    shape: ModelShape,
    precision: str,
    lora_r: int,
    lengths: Sequence[int],
    batch_size: int,
    micro_batch_size: int | None,
    device: Device,
    budget_gb: float,
    budget_reason: str,
    gradient_checkpointing: bool | Auto = AUTO,
    answer_fraction: float = 0.5,
    quantization: Quantization = "none",
    token_logps: bool = False,
    shared_prefix: int = 0,
    steps: int = 0,
) -> MemoryPlan:
    """`token_logps`: the job trains on answer tokens' log-probabilities (DPO, GRPO), not on
    the fused head + loss; `shared_prefix`: tokens every example begins with, which a flat
    micro-batch holds once; `steps`: the job's optimizer steps (0: not known)."""
    reasons = [f"budget: {budget_reason}"]
    longest_row = max(lengths, default=1)
    mean = sum(lengths) / max(1, len(lengths))
    row_tokens = max(longest_row, MIN_ROW_TOKENS)
    step_tokens = math.ceil(mean * batch_size)
    # A micro-batch allowed more than a step brings (the slack below, a short data set) is
    # planned for what the job's steps bring, not for its limit. (Rows with a 4D mask, for
    # a model without varlen attention, pad to their widest: a little more.)
    largest_step = largest_step_tokens(lengths, batch_size, steps, shared_prefix)

    fixed = {
        "weights": base_weight_bytes(
            shape.linear_params, shape.other_params, BYTES[precision], quantization
        )
        / GIB,
        # fp32 LoRA weight + gradient + AdamW's two moments
        "lora_and_optimizer": shape.lora_params(lora_r) * 16 / GIB,
        "runtime": RUNTIME_OVERHEAD_GB[device]
        + (CPU_BF16_RUNTIME_EXTRA_GB if device == "cpu" and precision == "bf16" else 0.0),
    }
    if quantization != "none":
        # A quantized layer's weight is dequantized to the compute precision for each
        # matmul, forward and backward: the largest layer's, twice, at any moment.
        fixed["dequantization"] = 2 * shape.largest_linear * BYTES[precision] / GIB
    fixed_gb = sum(fixed.values())

    # Per token, whatever the micro-batch: an average over every example, worked out once
    attention_per_token = {
        checkpointing: attention_bytes_per_token(
            shape, lengths, shared_prefix, precision, device, checkpointing
        )
        for checkpointing in (False, True)
    }

    def peak(tokens: int, checkpointing: bool) -> tuple[float, dict[str, float]]:
        held = min(tokens, largest_step)
        # A flat row is padded up to its bucket (data.bucket_length): at most 1/8 more.
        per_token = activation_bytes_per_token(
            shape, precision, checkpointing, device, quantization
        )
        acts = held * 9 / 8 * per_token / GIB
        attention = held * attention_per_token[checkpointing] / GIB
        if token_logps:
            rows = min(held * answer_fraction, LOGPS_ROWS)
            logits = rows * shape.vocab_size * 4 * LOGPS_TENSORS / GIB
        else:  # the fused head + loss holds one chunk of logits and its softmax (fused.py)
            rows = min(held * answer_fraction, loss_chunk_rows(shape.vocab_size))
            logits = rows * shape.vocab_size * BYTES[precision] * 2 / GIB
        parts = {"activations": acts, "attention": attention, "logits": logits}
        return fixed_gb + sum(parts.values()), parts

    if micro_batch_size:
        candidates = [micro_batch_size * row_tokens]
        reasons.append(f"micro-batch of {micro_batch_size} examples requested")
    else:
        # Packed rows are padded to the longest row: leave one row of slack, so that a
        # step is not split into two micro-batches by a few tokens.
        rows_needed = math.ceil(step_tokens / row_tokens) + 1
        first = min(rows_needed * row_tokens, MAX_MICRO_BATCH_TOKENS)
        candidates = []
        tokens = first
        while tokens > row_tokens:
            candidates.append(tokens)
            tokens //= 2
        candidates.append(row_tokens)
    checkpoint_options = (
        [False, True] if gradient_checkpointing == AUTO else [gradient_checkpointing]
    )

    chosen: tuple[int, bool, float, dict[str, float]] | None = None
    for checkpointing in checkpoint_options:
        for tokens in candidates:
            total, parts = peak(tokens, checkpointing)
            if total <= budget_gb:
                chosen = (tokens, checkpointing, total, parts)
                break
        if chosen:
            break
    fits = chosen is not None
    if chosen is None:
        tokens, checkpointing = candidates[-1], checkpoint_options[-1]
        total, parts = peak(tokens, checkpointing)
        chosen = (tokens, checkpointing, total, parts)
    tokens, checkpointing, total, parts = chosen
    if fits and tokens < candidates[0]:
        reasons.append(f"micro-batch cut to {tokens} tokens to fit the budget")
    if checkpointing:
        reasons.append(
            "gradient checkpointing on: activations would not fit otherwise"
            if gradient_checkpointing == "auto"
            else "gradient checkpointing requested"
        )
    else:
        reasons.append("gradient checkpointing off: activations fit, so no recompute cost")
    micro_examples = max(1, int(tokens // max(1.0, mean)))
    return MemoryPlan(
        fits=fits,
        device=device,
        precision=precision,
        estimated_peak_gb=round(total, 3),
        memory_budget_gb=round(budget_gb, 2),
        micro_batch_size=min(micro_examples, batch_size),
        gradient_accumulation_steps=max(1, math.ceil(step_tokens / tokens)),
        gradient_checkpointing=checkpointing,
        micro_batch_tokens=tokens,
        row_tokens=row_tokens,
        breakdown_gb={k: round(v, 3) for k, v in {**fixed, **parts}.items()},
        reasons=reasons,
        quantization=quantization,
        cut_to_fit=fits
        and (tokens < candidates[0] or (checkpointing and gradient_checkpointing == "auto")),
    )


@dataclass(frozen=True)
class TrainingPlan:
    """A job's resolved hyperparameters, precision and memory plan: made by one call."""

    hyperparameters: ResolvedHyperparameters
    precision: PrecisionDecision
    memory: MemoryPlan


def plan_training(
    request: HyperparameterRequest,
    *,
    data: DataFacts,
    shape: ModelShape,
    recommended: Recommended,
    device: Device,
    precision: PrecisionDecision,
    budget_gb: float,
    budget_reason: str,
    resolved: ResolvedHyperparameters | None = None,
    devices: int = 1,
    quantizations: Sequence[Quantization] = (),
) -> TrainingPlan:
    """The trainer's and the estimates' one way from a request and the data to a plan.

    `data` holds the token counts of every pair; `resolved` is given when a job resumes
    with the values it was first resolved to; `quantizations`: the quantized bases this
    process can train with (quantization.QuantizationSupport), tried in order by "auto"
    when the base in the training precision does not fit without cuts.
    """
    if resolved is None:
        resolved = resolve(
            request,
            data=data,
            max_positions=shape.max_positions,
            recommended=recommended,
            lora_params_per_rank=shape.lora_params(1),
            devices=devices,
        )
    asked = resolved.quantization
    options: list[Quantization] = ["none"]
    if asked == AUTO and resolved.processes == 1:
        options += quantizations
    elif asked != AUTO:
        options = [asked]  # type: ignore[list-item]
    tried: list[MemoryPlan] = []
    for quantization in options:
        memory = plan_memory(
            shape=shape,
            precision=precision.precision,
            lora_r=resolved.lora_r,
            lengths=[min(n, resolved.max_seq_length) for n in data.lengths],
            batch_size=resolved.batch_size,
            micro_batch_size=resolved.micro_batch_size,
            device=device,
            budget_gb=budget_gb,
            budget_reason=budget_reason,
            gradient_checkpointing=resolved.gradient_checkpointing,
            quantization=quantization,
            token_logps=resolved.method != "supervised",
            shared_prefix=data.shared_prefix if resolved.method == "supervised" else 0,
            steps=total_steps(resolved, data.num_pairs),
        )
        tried.append(memory)
        if memory.fits and not memory.cut_to_fit:
            break
    if asked == AUTO and len(tried) > 1:
        memory.reasons.insert(1, _why_quantized(tried, memory))
    elif asked not in (AUTO, "none"):
        memory.reasons.insert(1, f"base in {LABELS[memory.quantization]}: requested")
    return TrainingPlan(replace(resolved, quantization=memory.quantization), precision, memory)


def total_steps(params: ResolvedHyperparameters, examples: int) -> int:
    """The optimizer steps a job on `examples` training examples takes at most (auto
    epochs: to their cap)."""
    steps = math.ceil(examples / params.batch_size) * params.epochs
    return min(steps, params.max_steps) if params.max_steps else steps


def longest_steps(params: ResolvedHyperparameters, examples: int) -> int:
    """Auto epochs: how far the cap may be raised for a run still learning at it
    (until_learned.py): to twice itself, never past AUTO_MAX_EPOCHS or `max_steps`."""
    cap = total_steps(params, examples)
    if not params.until_learned:
        return cap
    steps_per_epoch = math.ceil(examples / params.batch_size)
    longest = min(MAX_CAP_FACTOR * cap, max(cap, AUTO_MAX_EPOCHS * steps_per_epoch))
    return min(longest, params.max_steps) if params.max_steps else longest


def _label(plan: MemoryPlan) -> str:
    """The base as a plan has it: as stored in its precision, or quantized."""
    return (
        f"as stored ({plan.precision})"
        if plan.quantization == "none"
        else LABELS[plan.quantization]
    )


def _why_quantized(tried: list[MemoryPlan], chosen: MemoryPlan) -> str:
    """What "auto" tried before the plan it chose, in the plan's reasons."""
    before = [
        f"{_label(p)} needs {p.estimated_peak_gb:.1f} GB"
        + (" with the micro-batch cut" if p.cut_to_fit else "")
        for p in tried
        if p is not chosen
    ]
    return (
        f"base in {LABELS[chosen.quantization]}: "
        f"{'; '.join(before)} (budget {chosen.memory_budget_gb:.1f} GB); a quantized base "
        "comes before cutting the micro-batch or checkpointing"
    )
