"""About how fast this machine trains a model before any job has: the work a trained token
costs over the matrix speed measured here.

A LoRA step on a frozen base runs every linear layer forward and back through its input
(about 4 FLOPs per weight and token; the adapter and attention are small beside them on
short examples). Training reaches about half of what a plain matrix product does here:
measured 2026-11-25 on a 2-core AMD EPYC at ~110 GFLOP/s, builtin:tiny trained at 4,400
tok/s of 8,700 and the Qwen2.5-0.5B shape through peft at 57 of 77. Once a job has run on
the model and device, its own speed replaces this (services/estimates.py).
"""

import time
from functools import lru_cache

from app.ml.shapes import ModelShape

FLOPS_PER_WEIGHT_AND_TOKEN = 4
TRAINING_EFFICIENCY = 0.5
PROBE_SIZE = 512
PROBE_SECONDS = 0.1


@lru_cache(maxsize=4)
def cpu_gflops(threads: int) -> float:
    """fp32 matrix products per second on `threads` CPU threads, measured once (~0.1 s)."""
    import torch

    earlier = torch.get_num_threads()
    torch.set_num_threads(threads)  # this thread's count only: put back below
    try:
        a = torch.randn(PROBE_SIZE, PROBE_SIZE)
        b = torch.randn(PROBE_SIZE, PROBE_SIZE)
        a @ b  # first-call costs out of the figure
        products, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < PROBE_SECONDS:
            a @ b
            products += 1
    finally:
        torch.set_num_threads(earlier)
    return 2 * PROBE_SIZE**3 * products / elapsed / 1e9


def rough_tokens_per_second(shape: ModelShape, gflops: float) -> float:
    """Training tokens a second for a model of `shape` on a device of `gflops`."""
    flops_per_token = FLOPS_PER_WEIGHT_AND_TOKEN * shape.linear_params
    return TRAINING_EFFICIENCY * gflops * 1e9 / flops_per_token
