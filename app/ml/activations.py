"""What a training step holds beside the weights: the tokens its largest micro-batch
brings, and the activations each token keeps for the backward pass (planner.py adds them
to the weights, the optimizer and the logits)."""

import math
from collections.abc import Sequence

from app.ml.shapes import ModelShape

BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# CPU flash attention's backward costs ~1 ms a call whatever the length: below ~200 tokens
# the plain matmul-softmax-matmul ("math") attention is faster forward and backward
# (measured: 80 tokens 0.7 vs 1.3 ms; 256 tokens about even; 1,024 tokens 2x slower).
# varlen_attention.py runs it so; the planner counts what it keeps.
CPU_MATH_BELOW_TOKENS = 192

# Checkpointing on the CPU spares less than the activations it recomputes: over a backward
# glibc's heap comes to hold 0.3-0.45 of what the same step keeps without it, in freed
# pieces of the recomputed layers (malloc's own figures, in use against held:
# bench/rss_by_phase.py; docs/benchmarks.md, "Planner accuracy").
CHECKPOINTED_HEAP_KEPT = {"cpu": 0.4}
# An 8-bit base trains through peft's own LoRA forward over bitsandbytes' layers, not the
# fused op (fused.py: LLM.int8 quantizes the activations too, and serving runs the same
# ops): the Qwen2.5-0.5B shape's loop held 1.5x the activations of the fused path.
UNFUSED_8BIT = 1.5


def largest_step_tokens(
    lengths: Sequence[int], batch_size: int, steps: int, shared_prefix: int = 0
) -> int:
    """About the most tokens one of a job's `steps` steps brings, its examples' shared
    prefix counted once (a flat micro-batch holds it once: data.collate_flat).

    Each epoch is a fresh shuffle (training/schedule.py), so a step's tokens are the sum of
    batch_size draws without replacement: mean b·μ, deviation σ·√(b(n−b)/(n−1)). The
    highest of `steps` such sums lies about √(2 ln steps) deviations above the mean (a
    little less for a few dozen steps). Never more than the batch_size longest examples
    together, which is also the answer when the steps are not known.
    """
    n, b = len(lengths), min(batch_size, len(lengths))
    if n == 0:
        return 1
    shared = shared_prefix * (b - 1)
    longest = sum(sorted(lengths)[-b:]) - shared
    if steps <= 0 or n == b:
        return max(1, longest)
    mean = sum(lengths) / n
    variance = sum((x - mean) ** 2 for x in lengths) / n
    deviation = math.sqrt(variance * b * (n - b) / (n - 1))
    expected = b * mean - shared + math.sqrt(2 * math.log(max(2, steps))) * deviation
    return max(1, min(longest, math.ceil(expected)))


def activation_bytes_per_token(
    shape: ModelShape, precision: str, checkpointing: bool, device: str, quantization: str
) -> float:
    """The bytes one token of a micro-batch holds at the backward's peak, every layer."""
    act = BYTES[precision]
    h, i = shape.hidden_size, shape.intermediate_size
    # Kept for backward per token and layer: block inputs, q/k/v/attention output, the MLP's
    # gate/up/activation, norms and LoRA intermediates (empirically ~14h + 4i values).
    fused_layer = (14 * h + 4 * i) * act
    per_layer = fused_layer * (UNFUSED_8BIT if quantization == "8bit" else 1.0)
    every_layer = shape.num_layers * per_layer
    if checkpointing:  # layer inputs + one layer recomputed, and what the heap keeps
        # (of the fused path's activations whatever the base: an 8-bit base's checkpointed
        # loop on the 0.5B shape held 2.55 GiB, planned at 2.62 this way)
        kept = CHECKPOINTED_HEAP_KEPT.get(device, 0.0) * shape.num_layers * fused_layer
        return shape.num_layers * h * act + per_layer + kept
    return every_layer


def attention_bytes_per_token(
    shape: ModelShape,
    lengths: Sequence[int],
    shared_prefix: int,
    precision: str,
    device: str,
    checkpointing: bool,
) -> float:
    """What packed attention (varlen_attention.py) keeps per token beyond the per-token
    activations, on average over the examples: each example's own copy of the shared
    prefix's queries, keys and values (concatenated in front of it); where an example is
    short enough for math attention on the CPU, its attention probabilities (heads x keys
    x keys, fp32); and on the CPU in bf16, where attention runs in fp32, the fp32 copies
    of its queries, keys, values and output.

    SmolLM2-135M-Instruct in bf16 on the CPU (a 30-token system prompt in its template,
    examples of ~21 tokens after it): the loop's RSS grew 10.7 KB a token and layer more
    than the per-token activations (28.4) from 200 to 800 tokens a step; this counts 16,
    and the plans came within -2% and +6% of the peaks (bench/rss_by_phase.py;
    docs/benchmarks.md, "Planner accuracy")."""
    own = [max(1, length - shared_prefix) for length in lengths]
    if not own:
        return 0.0
    q_dim, kv_dim = shape.num_heads * shape.head_dim, shape.num_kv_heads * shape.head_dim
    in_fp32 = device == "cpu" and precision == "bf16"
    act = 4 if in_fp32 else BYTES[precision]
    math_below = CPU_MATH_BELOW_TOKENS if device == "cpu" else 0
    kept = 0.0
    for tokens in own:
        keys = tokens + shared_prefix
        kept += shared_prefix * (q_dim + 2 * kv_dim) * act
        if in_fp32:  # the example's own queries, keys, values and output, cast
            kept += tokens * (2 * q_dim + 2 * kv_dim) * act
        if keys < math_below:  # the CPU's math attention computes them in fp32
            kept += shape.num_heads * keys * keys * 4
    layers = 1 if checkpointing else shape.num_layers  # a checkpointed step: one layer's
    return layers * kept / sum(own)
