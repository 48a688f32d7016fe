"""The adapter on disk: safetensors weights, the tokenizer and qatune's metadata.

Written to a staging directory that is renamed into place, so a reader sees the old
adapter or the whole new one; read back only from safetensors.
"""

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.language import tr
from app.ml.training.metrics import EvaluationReport
from app.ml.training.model_card import make_portable

ADAPTER_METADATA = "qatune_adapter.json"
EVALUATION = "evaluation.json"  # the job's answer table (training/evaluation.py)
REQUIRED_FILES = ("adapter_config.json", "adapter_model.safetensors", ADAPTER_METADATA)


class AdapterInvalid(RuntimeError):
    """The adapter directory is incomplete, not safetensors, or for another base model."""


@dataclass(frozen=True)
class AdapterMetadata:
    base_model: str
    system_prompt: str | None = None  # the one every training pair had, if any
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    longest_answer_tokens: int = 0  # of the training answers (0: not recorded)
    started_from: str | None = None  # the fine-tuned model it was trained further from

    @property
    def quantization(self) -> str:
        """The base's weights in training: none, 8bit or 4bit (QLoRA)."""
        return str(self.hyperparameters.get("quantization", "none"))


def read_adapter_metadata(adapter_dir: Path) -> AdapterMetadata:
    missing = [name for name in REQUIRED_FILES if not (adapter_dir / name).is_file()]
    if missing:
        raise AdapterInvalid(
            tr("Adapter is incomplete (missing {files})", files=", ".join(missing))
        )
    if any(adapter_dir.glob("*.bin")):
        raise AdapterInvalid(tr("Adapter contains pickle (.bin) weights; only safetensors load"))
    try:
        raw = json.loads((adapter_dir / ADAPTER_METADATA).read_text())
        return AdapterMetadata(
            base_model=str(raw["base_model"]),
            system_prompt=raw.get("system_prompt"),
            hyperparameters=dict(raw.get("hyperparameters", {})),
            plan=dict(raw.get("plan", {})),
            metrics=dict(raw.get("metrics", {})),
            created_at=str(raw.get("created_at", "")),
            longest_answer_tokens=int(raw.get("longest_answer_tokens", 0)),
            started_from=raw.get("started_from"),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise AdapterInvalid(tr("Adapter metadata is unreadable ({exc})", exc=exc)) from exc


DEFAULT_ANSWER_TOKENS = 256
MAX_DEFAULT_ANSWER_TOKENS = 2048


def answer_budget(metadata: AdapterMetadata | None) -> int:
    """How many tokens an answer may take unless the caller says: room for twice the
    longest answer the adapter was trained on (a byte-level tokenizer spends ~600 tokens
    on 200 Chinese characters), 256 at least."""
    longest = metadata.longest_answer_tokens if metadata else 0
    return min(MAX_DEFAULT_ANSWER_TOKENS, max(DEFAULT_ANSWER_TOKENS, 2 * longest))


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


def now_iso() -> str:
    return datetime.now(UTC).isoformat()
