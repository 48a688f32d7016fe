"""Where things live under the data dir. Every name here is generated, never user input."""

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


def new_key() -> str:
    return secrets.token_hex(16)


def write_atomic(path: Path, content: bytes) -> None:
    """Readers see the old file or the whole new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Storage:
    data_dir: Path

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    def base_answers_dir(self, owner: str) -> Path:
        """The base models' answers in one owner's answer tables (their questions: theirs);
        `owner` is a user's id, or "cli" for `qatune train`."""
        return self.data_dir / "base-answers" / owner

    def dataset_file(self, key: str) -> Path:
        return self.data_dir / "datasets" / f"{key}.jsonl"

    def dataset_original(self, key: str) -> Path:
        """The file as it was uploaded (GET /v1/files/{id}/content returns it)."""
        return self.data_dir / "datasets" / f"{key}.original"

    def job_dir(self, key: str) -> Path:
        return self.data_dir / "jobs" / key

    def job_train_file(self, key: str) -> Path:
        return self.job_dir(key) / "train.jsonl"

    def job_validation_file(self, key: str) -> Path:
        return self.job_dir(key) / "validation.jsonl"

    def job_keep_file(self, key: str) -> Path:
        """The answers the model a job trains further was trained on: kept, and counted."""
        return self.job_dir(key) / "keep.jsonl"

    def start_adapter_dir(self, key: str) -> Path:
        """The weights a job started from, when it fine-tunes a fine-tuned model."""
        return self.job_dir(key) / "start-adapter"

    def adapter_dir(self, key: str) -> Path:
        return self.job_dir(key) / "adapter"

    def checkpoints_dir(self, key: str) -> Path:
        return self.job_dir(key) / "checkpoints"

    def exports_dir(self, key: str) -> Path:
        return self.job_dir(key) / "exports"

    def export_file(self, key: str, export_format: str) -> Path:
        """A finished export (services/exports/exporter.py), in one of its formats."""
        return self.exports_dir(key) / f"{export_format}.zip"

    def job_log(self, key: str) -> Path:
        return self.job_dir(key) / "job.log"

    def remove_job_files(self, key: str) -> None:
        shutil.rmtree(self.job_dir(key), ignore_errors=True)
