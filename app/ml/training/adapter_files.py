"""The adapter on disk: safetensors weights, the tokenizer and qatune's metadata.

Written to a staging directory that is renamed into place, so a reader sees the old
adapter or the whole new one; read back only from safetensors.
"""

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.ml.training.adapter_metadata import (
    ADAPTER_METADATA,
    AdapterMetadata,
)
from app.ml.training.metrics import EvaluationReport
from app.ml.training.model_card import portable_base_name

EVALUATION = "evaluation.json"  # the job's answer table (training/evaluation.py)


def read_evaluation(adapter_dir: Path) -> EvaluationReport | None:
    """The answer table saved with the adapter; None for an adapter saved without one."""
    try:
        return EvaluationReport.model_validate_json((adapter_dir / EVALUATION).read_bytes())
    except FileNotFoundError:
        return None


def save_adapter(
    model: Any,
    tokenizer: Any,
    target: Path,
    metadata: AdapterMetadata,
    evaluation: EvaluationReport | None = None,
    card: str | None = None,
) -> Path:
    """Weights (safetensors), tokenizer, metadata, the answer table and a model card that
    makes it load outside qatune (model_card.py), written aside, then renamed into place."""
    staging = stage_adapter(model, tokenizer, target, metadata)
    try:
        return commit_adapter(staging, target, metadata, evaluation=evaluation, card=card)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def stage_adapter(model: Any, tokenizer: Any, target: Path, metadata: AdapterMetadata) -> Path:
    """The adapter written beside `target`, not yet in place: a loadable adapter (the answer
    table loads it from here). The caller commits it or removes it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        (staging / ADAPTER_METADATA).write_text(json.dumps(asdict(metadata), indent=2))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def commit_adapter(
    staging: Path,
    target: Path,
    metadata: AdapterMetadata,
    *,
    evaluation: EvaluationReport | None = None,
    card: str | None = None,
) -> Path:
    """The staged adapter, with its final metadata, answer table and card, renamed into
    place: a reader sees the old adapter or the whole new one."""
    (staging / ADAPTER_METADATA).write_text(json.dumps(asdict(metadata), indent=2))
    if evaluation is not None:
        (staging / EVALUATION).write_text(evaluation.model_dump_json(indent=2))
    if card is not None:
        make_portable(staging, card, metadata.base_model)
    if target.exists():
        old = target.with_name(f".{target.name}.old")
        os.replace(target, old)
        os.replace(staging, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, target)
    return target


def make_portable(directory: Path, card: str, base_model: str) -> None:
    """Point adapter_config.json at the portable base name and replace peft's blank card."""
    config_path = directory / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["base_model_name_or_path"] = portable_base_name(base_model)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))
    (directory / "README.md").write_text(card)
