"""What qatune writes beside an adapter's weights (qatune_adapter.json), read back.

The base it was trained on, the system prompt of its data, its hyperparameters, plan and
metrics, the fine-tuned model it started from, where its base came from; and from them the
default budget of an answer. Every reader of an adapter (serving, checkpoints, the model
card, exports) takes this one type.
"""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.language import tr

ADAPTER_METADATA = "qatune_adapter.json"
SCOPE_FILE = "scope.safetensors"  # the adapter's scope (app/ml/scope.py), if it has one
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
    # Where a GGUF base came from (gguf_bases.GgufSource's fields: kind, name, sha256,
    # quantization, architecture); None for a base read as safetensors
    base_source: dict[str, str] | None = None

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
            base_source=raw.get("base_source"),
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


def now_iso() -> str:
    return datetime.now(UTC).isoformat()
