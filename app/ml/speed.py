"""About how fast this machine trains a model before any job has: the work a trained token
costs over the matrix speed measured here.

A LoRA step on a frozen base runs every linear layer forward and back through its input
(about 4 FLOPs per weight and token; the adapter and attention are small beside them on
short examples). Training reaches about half of what a plain matrix product does here:
measured 2026-11-25 on a 2-core AMD EPYC at ~110 GFLOP/s, builtin:tiny trained at 4,400
tok/s of 8,700 and the Qwen2.5-0.5B shape through peft at 57 of 77. Once a job has run on
the model and device, its own speed replaces this (services/jobs/estimates.py).

The matrix speed is what a job would get now, not what the machine has: one probe taken
while the machine was busy, kept for the life of the process, put jobs of 13-32 s at
385-484 s.
"""

import statistics
import threading
import time

import psutil

from app.ml.shapes import ModelShape

FLOPS_PER_WEIGHT_AND_TOKEN = 4
TRAINING_EFFICIENCY = 0.5
PROBE_SIZE = 512
PROBE_SECONDS = 0.05
PROBES = 3
LOAD_WINDOW_S = 0.2
REFRESH_S = 120.0
_measured: dict[int, tuple[float, float]] = {}  # physical cores → (when, GFLOP/s)
_lock = threading.Lock()


def cpu_gflops(physical: int) -> float:
    """fp32 matrix products per second on the threads a job would get now: the cores the
    machine's other work leaves free, as the training loop takes them (cpu_share.py). The
    median of three short probes, measured again after REFRESH_S."""
    with _lock:
        measured = _measured.get(physical)
        if measured and time.monotonic() - measured[0] < REFRESH_S:
            return measured[1]
        figure = statistics.median(_probe(threads_free(physical)) for _ in range(PROBES))
        _measured[physical] = (time.monotonic(), figure)
        return figure


def threads_free(physical: int) -> int:
    """Threads that fit beside what everything on the machine ran in the last moment."""
    from app.ml.cpu_share import threads_for  # imports torch: not on the app's import path

    logical = psutil.cpu_count() or physical
    before = psutil.cpu_times()
    time.sleep(LOAD_WINDOW_S)
    after = psutil.cpu_times()
    total = sum(after) - sum(before)
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0) - getattr(before, "iowait", 0))
    busy_cores = max(0.0, (total - idle) / total * logical) if total > 0 else 0.0
    return threads_for(busy_cores, logical, max(1, physical))


def _probe(threads: int) -> float:
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
