"""The base model's answers in the answer table, kept across jobs.

The base model's greedy answer to a prompt, under the table's stopping rule, is the same
for every job on that base: the first job asks it, the next ones read it. One file per base
model, precision and device, named by a fingerprint of the model's files (a base whose
weights change gets a new file), mapping each row (prompt and reference token ids) to the
answer. Written whole to a temporary file and renamed, so two jobs finishing together
lose at most each other's new rows, never the file.
"""

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from loguru import logger

from app.ml.planner import TrainingPlan

MAX_ROWS_PER_BASE = 10_000  # the oldest rows go first beyond this
FORMAT = 1  # bump when the table's decoding rule changes: old answers are then not reused


class BaseAnswers:
    def __init__(self, directory: Path, model_dir: Path, *, device: str, precision: str) -> None:
        self.path = directory / f"{fingerprint(model_dir, device, precision)}.json"

    @staticmethod
    def row_key(prompt: Sequence[int], expected: Sequence[int], keep: int) -> str:
        text = json.dumps([list(prompt), list(expected), keep], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def read(self) -> dict[str, str]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # a damaged file is asked again, not trusted
            logger.warning("Ignoring the base answers in {}: {}", self.path, exc)
            return {}
        if not isinstance(raw, dict):
            return {}
        return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}

    def add(self, answers: Mapping[str, str]) -> None:
        if not answers:
            return
        rows = self.read()
        for key in answers:
            rows.pop(key, None)  # re-added at the end: the newest
        rows.update(answers)
        kept = dict(list(rows.items())[-MAX_ROWS_PER_BASE:])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".answers.", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(kept, out, ensure_ascii=False)
            os.replace(temporary, self.path)
        except OSError as exc:  # a full disk costs the next job a recomputation, no more
            logger.warning("Could not keep the base answers in {}: {}", self.path, exc)
            Path(temporary).unlink(missing_ok=True)


def answering_as(plan: TrainingPlan, quantized: bool) -> str:
    """What decodes the base in a job of this plan: its precision, and a quantized base's
    quantization (it answers as itself, not as the 16-bit one)."""
    precision = plan.precision.precision
    return f"{precision}-{plan.hyperparameters.quantization}" if quantized else precision


def fingerprint(model_dir: Path, device: str, precision: str) -> str:
    """The base model's identity: its files' names, sizes and times, and what decodes it."""
    files = sorted(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in model_dir.resolve().iterdir()
        if p.is_file() and p.suffix in {".json", ".safetensors", ".model", ".jinja"}
    )
    identity = [str(model_dir.resolve()), files, device, precision, torch.__version__, FORMAT]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]
