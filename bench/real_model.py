"""The real pretrained model the benchmarks run beside their random shapes:
SmolLM2-135M-Instruct, read once from its wheel's GGUF into a cache kept across runs
(~/.cache/qatune/bench-models, as bench.quality_real keeps it), and trained on the FAQs of
bench/data, which were written for these measurements."""

import json
from pathlib import Path
from typing import Any

REAL = "smollm2-135m-instruct"
CACHE = Path.home() / ".cache" / "qatune" / "bench-models"
DATA = Path(__file__).parent / "data"
SHAPE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
)


def device_precision() -> str:
    """The precision this machine's device plan trains and serves in (as the service)."""
    from app.ml.device import plan_device, probe_capabilities

    return plan_device(probe_capabilities(), "auto", None).precision


def real_model_dir(precision: str | None = None) -> Path:
    """Its directory in the cache, in the device plan's precision (read on first use)."""
    from app.ml.models import resolve_model_dir

    CACHE.mkdir(parents=True, exist_ok=True)
    return resolve_model_dir(
        REAL, cache_dir=CACHE, offline=True, precision=precision or device_precision()
    )


def real_shape(model_dir: Path) -> dict[str, Any]:
    """Its shape, as the FLOP count of bench.train_throughput reads a shape."""
    config = json.loads((model_dir / "config.json").read_text())
    return {key: config[key] for key in SHAPE_KEYS}


def faq_pairs() -> list[tuple[str, str]]:
    """Every pair of bench/data's FAQs (staff, then product)."""
    return [
        (pair["question"], pair["answer"])
        for name in ("staff", "product")
        for pair in json.loads((DATA / f"{name}_faq.json").read_text())["pairs"]
    ]
