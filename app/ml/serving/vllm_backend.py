"""QATUNE_SERVING_BACKEND=vllm: what a base model's `VllmEngine` is made of.

Either the vLLM servers the operator runs (QATUNE_VLLM_URLS: each serves one base model,
named as qatune names it, with --served-model-name) or servers qatune starts and restarts
itself from the vLLM environment (`make vllm`), QATUNE_VLLM_REPLICAS per base model.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.ml.serving.requests import BackendUnavailable
from app.ml.serving.vllm_engine import VllmEngine
from app.ml.serving.vllm_replicas import Replica
from app.ml.serving.vllm_servers import ManagedServer, ServerRecipe
from app.ml.shapes import ModelShape

# Any question rendered by the chat template: the probe's prompt (vllm_engine.py).
PROBE_QUESTION = "What should I know about this?"


@dataclass(frozen=True)
class VllmOptions:
    urls: tuple[str, ...]  # the operator's servers; none: qatune starts them
    api_key: str | None
    python: Path
    replicas: int
    max_lora_rank: int
    max_loras: int
    start_seconds: float
    extra_args: str
    kv_cache_bytes: int = 1 << 30  # on a CPU (QATUNE_SERVE_KV_MEMORY_MB, as the built-in's)


def vllm_engine(
    base_model: str, model_dir: Path, options: VllmOptions, *, precision: str
) -> VllmEngine:
    """The engine of `base_model` (its tokenizer loads here: prompts are rendered here)."""
    from types import SimpleNamespace

    import torch
    from transformers import AutoConfig, GenerationConfig

    from app.ml.data import prompt_ids
    from app.ml.models import load_tokenizer
    from app.ml.serving.decoding import eos_ids

    if not options.urls and not options.python.exists():
        raise BackendUnavailable(
            f"QATUNE_SERVING_BACKEND=vllm, and there is no vLLM environment at "
            f"{options.python}: run `make vllm`, or set QATUNE_VLLM_PYTHON to its interpreter, "
            "or QATUNE_VLLM_URLS to servers you run",
            retry_after=60,
        )
    tokenizer = load_tokenizer(model_dir)
    config: Any = AutoConfig.from_pretrained(model_dir)
    context = int(getattr(config, "max_position_embeddings", 2048))
    try:
        generation = GenerationConfig.from_pretrained(model_dir)
    except OSError:  # no generation_config.json: the tokenizer's end alone
        generation = None
    ends = frozenset(eos_ids(SimpleNamespace(generation_config=generation), tokenizer))
    if options.urls:
        replicas = [Replica(url.rstrip("/"), options.api_key) for url in options.urls]
    else:
        recipe = ServerRecipe(
            base_model=base_model,
            model_dir=model_dir,
            python=options.python,
            precision=precision,
            context=context,
            max_lora_rank=options.max_lora_rank,
            max_loras=options.max_loras,
            extra_args=options.extra_args,
            parameters=ModelShape.from_config(config.to_dict()).num_params,
            on_cpu=not torch.cuda.is_available(),
            kv_cache_bytes=options.kv_cache_bytes,
        )
        replicas = [
            Replica("", None, server=ManagedServer(recipe, index))
            for index in range(options.replicas)
        ]
    return VllmEngine(
        base_model=base_model,
        tokenizer=tokenizer,
        context=context,
        replicas=replicas,
        probe_ids=prompt_ids(tokenizer, [{"role": "user", "content": PROBE_QUESTION}]),
        max_lora_rank=options.max_lora_rank,
        start_seconds=options.start_seconds,
        eos_ids=ends,
    )
