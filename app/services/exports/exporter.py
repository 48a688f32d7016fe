"""A job's model in other forms (merged, GGUF; see app/ml/export): built once, in the
background, with progress, kept beside the job and deleted with it.

One export runs at a time, in a thread of the API process (merging reads the base model
once and writes it once: disk-bound, minutes on a 7B model; llama.cpp's converters run in a
child process). The finished file is renamed into place whole, so a crash mid-export leaves
only a staging folder, which the next export of the job clears; its file's existence is
what "ready" means.
"""

import io
import json
import math
import os
import shutil
import tempfile
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO, Literal

from loguru import logger

from app.core.disk import disk_full, failed_for_space
from app.core.errors import NotPossibleHere
from app.core.language import Sentence, said, tr, verbatim
from app.core.storage import Storage
from app.db.models import Job
from app.ml.builtin import is_builtin
from app.ml.export import GGUF_TYPES, GgufType, Progress
from app.ml.export.llama_cpp import ConverterMissing, require_converter, unknown_architecture
from app.ml.models import ModelUnavailable, resolve_model_dir

ExportFormat = Literal["merged", "gguf"]
# A merged export holds the base's weights twice while it is zipped: folder and archive; a
# GGUF one the merged folder (deleted after), the f16 GGUF and its zip.
DISK_FACTOR = {"merged": 2.2, "gguf": 3.2}


@dataclass(frozen=True)
class ExportKind:
    """What to export: a format, and for GGUF the weights' type."""

    format: ExportFormat
    outtype: GgufType | None = None

    @property
    def name(self) -> str:  # its file's name and its key
        return self.format if self.outtype is None else f"{self.format}-{self.outtype}"


KINDS = (ExportKind("merged"), *(ExportKind("gguf", t) for t in GGUF_TYPES))
# A GGUF tensor's bytes per weight (q8_0: 32 int8 weights and one f16 scale per block).
_GGUF_BYTES_PER_WEIGHT: dict[str, float] = {"f16": 2, "bf16": 2, "q8_0": 34 / 32}


@dataclass(frozen=True)
class BaseWeights:
    """The base model's safetensors as the size checks need them: read once (headers only)."""

    file_bytes: int
    count: int  # weights

    @classmethod
    def read(cls, base_dir: Path) -> "BaseWeights":
        files = base_dir.glob("*.safetensors")
        return cls(weight_file_bytes(base_dir), sum(_weight_count(p) for p in files))


def weight_file_bytes(base_dir: Path) -> int:
    return sum(p.stat().st_size for p in base_dir.glob("*.safetensors"))


def _weight_count(path: Path) -> int:
    with path.open("rb") as handle:  # an 8-byte length, then the JSON header
        header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
    return sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")


def estimated_bytes(weights: BaseWeights, kind: ExportKind, *, with_base: bool) -> int:
    """About how large the export will be, before it is made; the adapter adds little."""
    if kind.outtype is None:
        return weights.file_bytes
    files = 2 if with_base else 1  # the merged model, and the built-in base beside it
    return int(weights.count * _GGUF_BYTES_PER_WEIGHT[kind.outtype] * files)


class ExportStatus(StrEnum):
    NOT_STARTED = "not_started"
    RUNNING = "running"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class ExportState:
    kind: ExportKind
    status: ExportStatus
    progress: float = 0.0  # 0 to 1
    message: Sentence | None = None  # what is happening, read in the reader's language
    size_bytes: int | None = None  # of the finished file
    error: Sentence | None = None  # why it failed, read in the reader's language


@dataclass(frozen=True)
class ExportSource:
    """What an export is made from, resolved by the caller (the job's base, on disk)."""

    job_id: int
    storage_key: str
    base_model: str
    base_dir: Path


@dataclass(frozen=True)
class Offer:
    """One export a job's model can have, as it stands, with about how large it will be."""

    state: ExportState
    estimated_bytes: int | None  # None: the base model is not on disk here


class Exporter:
    def __init__(
        self,
        storage: Storage,
        llama_cpp_dir: Path,
        *,
        configured_models: tuple[str, ...] = (),
        offline: bool = False,
        precision: str = "bf16",
    ) -> None:
        self.storage = storage
        self.precision = precision  # the device plan's: a GGUF base is read in it
        self.llama_cpp_dir = llama_cpp_dir
        self.configured_models = configured_models
        self.offline = offline
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="export")
        self._states: dict[tuple[str, ExportKind], ExportState] = {}
        self._lock = threading.Lock()

    def state(self, storage_key: str, kind: ExportKind) -> ExportState:
        path = self._finished(storage_key, kind)
        if path is not None:
            return ExportState(
                kind, ExportStatus.READY, 1.0, said("ready"), size_bytes=path.stat().st_size
            )
        with self._lock:
            return self._states.get(
                (storage_key, kind), ExportState(kind, ExportStatus.NOT_STARTED)
            )

    def ready_file(self, job: Job, kind: ExportKind) -> Path | None:
        """The finished export's zip, or None while it is not ready."""
        return self._finished(job.storage_key, kind)

    def _finished(self, storage_key: str, kind: ExportKind) -> Path | None:
        path = self.storage.export_file(storage_key, kind.name)
        return path if path.is_file() else None

    def offers(self, job: Job) -> list[Offer]:
        """Every export of the job's model: its state and size, from what is on disk (a
        listing never downloads a model)."""
        try:
            weights: BaseWeights | None = BaseWeights.read(self._base_dir(job, offline=True))
        except ModelUnavailable:
            weights = None
        with_base = is_builtin(job.base_model)
        return [
            Offer(
                self.state(job.storage_key, kind),
                estimated_bytes(weights, kind, with_base=with_base) if weights else None,
            )
            for kind in KINDS
        ]

    def begin(self, job: Job, kind: ExportKind) -> ExportState:
        """Start the job's export (once); its state (ModelUnavailable if the base is not
        here and cannot be fetched, NotPossibleHere without room or a converter)."""
        base_dir = self._base_dir(job, offline=self.offline)
        return self.start(ExportSource(job.id, job.storage_key, job.base_model, base_dir), kind)

    def _base_dir(self, job: Job, *, offline: bool) -> Path:
        return resolve_model_dir(
            job.base_model,
            cache_dir=self.storage.models_dir,
            offline=offline,
            configured=self.configured_models,
            precision=self.precision,
        )

    def start(self, source: ExportSource, kind: ExportKind) -> ExportState:
        """Begin the export unless it is ready or running (a failed one is tried again)."""
        current = self.state(source.storage_key, kind)
        if current.status in (ExportStatus.READY, ExportStatus.RUNNING):
            return current
        if kind.format == "gguf":
            self._require_gguf_converter(source)
        self._require_disk(source, kind)
        key = (source.storage_key, kind)
        with self._lock:
            if key in self._states and self._states[key].status == ExportStatus.RUNNING:
                return self._states[key]  # another request started it meanwhile
            self._states[key] = ExportState(kind, ExportStatus.RUNNING, 0.0, said("queued"))
            self._pool.submit(self._run, source, kind)
            return self._states[key]

    def forget(self, storage_key: str) -> None:
        """The job is gone (its files went with it): drop what is remembered of it."""
        with self._lock:
            for key in [k for k in self._states if k[0] == storage_key]:
                del self._states[key]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _require_gguf_converter(self, source: ExportSource) -> None:
        try:
            converter = require_converter(self.llama_cpp_dir)
        except ConverterMissing as exc:
            raise NotPossibleHere(str(exc)) from exc
        architecture = unknown_architecture(converter, source.base_dir)
        if architecture is not None:
            raise NotPossibleHere(
                tr(
                    "llama.cpp cannot convert {base_model} ({architecture}) to GGUF: download the "
                    "merged export instead and serve it with transformers or vLLM",
                    base_model=source.base_model,
                    architecture=architecture,
                )
            )

    def _require_disk(self, source: ExportSource, kind: ExportKind) -> None:
        needed = int(weight_file_bytes(source.base_dir) * DISK_FACTOR[kind.format])
        where = self.storage.job_dir(source.storage_key)
        free = shutil.disk_usage(where).free
        if free < needed:
            raise NotPossibleHere(
                tr(
                    "Not enough disk for this export: it needs about {needed:.1f} GiB free under "
                    "{data_dir} and {free:.1f} GiB are; free some space (delete old jobs or their "
                    "exports) and ask again",
                    needed=needed / 2**30,
                    data_dir=self.storage.data_dir,
                    free=free / 2**30,
                )
            )

    def _report(self, source: ExportSource, kind: ExportKind) -> Progress:
        def report(share: float, message: Sentence) -> None:
            with self._lock:
                key = (source.storage_key, kind)
                if key in self._states:  # else the job was deleted meanwhile
                    self._states[key] = replace(self._states[key], progress=share, message=message)
            logger.info(
                "Export {} of job {}: {:.0%} {}", kind.name, source.job_id, share, message.text()
            )

        return report

    def _write(
        self, source: ExportSource, kind: ExportKind, folder: Path, report: Progress
    ) -> None:
        from app.ml.export.gguf import export_gguf
        from app.ml.export.merged import export_merged

        adapter_dir = self.storage.adapter_dir(source.storage_key)
        if kind.outtype is None:
            export_merged(source.base_dir, adapter_dir, folder, folder=folder.name, progress=report)
        else:
            export_gguf(
                source.base_dir,
                adapter_dir,
                folder,
                outtype=kind.outtype,
                converter=self.llama_cpp_dir,
                with_base=is_builtin(source.base_model),
                progress=report,
            )

    def _run(self, source: ExportSource, kind: ExportKind) -> None:
        key = (source.storage_key, kind)
        exports = self.storage.exports_dir(source.storage_key)
        report = self._report(source, kind)
        try:
            exports.mkdir(exist_ok=True)  # not parents: a deleted job's folder stays gone
            for stale in exports.glob(".staging-*"):  # a crash's leftovers
                shutil.rmtree(stale, ignore_errors=True)
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=exports))
            try:
                folder = staging / f"qatune-job-{source.job_id}-{kind.name}"
                folder.mkdir()
                self._write(source, kind, folder, report)
                report(0.97, said("packing the zip"))
                archive = staging / "export.zip"
                zip_folder(folder, archive, folder.name)
                os.replace(archive, self.storage.export_file(source.storage_key, kind.name))
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            with self._lock:
                self._states.pop(key, None)
            logger.info("Export {} of job {} ready", kind.name, source.job_id)
        except Exception as exc:  # noqa: BLE001  (the state says what failed; the API stays up)
            logger.exception("Export {} of job {} failed", kind.name, source.job_id)
            error = verbatim(f"{type(exc).__name__}: {exc}")
            if failed_for_space(exc, self.storage.data_dir):
                error = said(
                    "{problem}: free space and export again ({error})",
                    problem=disk_full(self.storage.data_dir),
                    error=error,
                )
            with self._lock:
                self._states[key] = ExportState(kind, ExportStatus.FAILED, error=error)


def zipped(folder: Path, arcname: str) -> bytes:
    """The folder as a zip, in memory (an adapter: megabytes)."""
    buffer = io.BytesIO()
    zip_folder(folder, buffer, arcname)
    return buffer.getvalue()


def zip_folder(folder: Path, archive: Path | BinaryIO, arcname: str) -> None:
    """The folder's files under `arcname/`. Weights are stored, not deflated (they barely
    compress); files are readable once unzipped, whatever umask wrote them."""
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            entry = zipfile.ZipInfo.from_file(path, arcname=f"{arcname}/{path.name}")
            entry.external_attr = 0o100644 << 16
            entry.compress_type = (
                zipfile.ZIP_STORED
                if path.suffix in (".safetensors", ".gguf")
                else zipfile.ZIP_DEFLATED
            )
            with path.open("rb") as src, out.open(entry, "w", force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, 2**22)
