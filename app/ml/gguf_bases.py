"""A GGUF file as a base model: read, checked and dequantized once into the model cache.

Laptop users keep their models as GGUF (LM Studio's folder, Ollama's blob store, the
package a pretrained model comes in). transformers reads the architectures in its
`GGUF_SUPPORTED_ARCHITECTURES` from GGUF; qatune then copies the weights into a model built
from the same config without the GGUF quantization (which `save_pretrained` refuses) and
saves it as safetensors, in the 16-bit type the device plan computes in (bf16; fp16 on a
device that trains in fp16: an fp32 device reads either without loss), beside the
tokenizer and its chat template. The directory is keyed by the file's SHA-256 and the
precision, written aside and renamed into place, and carries in qatune.json where it came
from (the file's name, its SHA-256, the quantization it was read from), which the
adapters trained on it repeat in their metadata and model card.
"""

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from loguru import logger

from app.core.language import tr
from app.ml.serving.requests import AskFailed

PRECISIONS = ("bf16", "fp16", "fp32")
# general.file_type (llama.cpp's LLAMA_FTYPE): the names its quantizations go by
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}  # fmt: skip


class GgufUnreadable(AskFailed, RuntimeError):
    """The file is no GGUF transformers can read as a base; the message says what to do."""


class GgufNotReadYet(Exception):
    """A readable GGUF, not yet in the model cache: said instead of reading it (a check
    answers in a moment, and the first job reads it)."""


@dataclass(frozen=True)
class GgufSource:
    """Where a base model came from, as its adapters' metadata and cards say it."""

    kind: str  # gguf (a file), ollama (a model of Ollama's store), packaged (a wheel's)
    name: str  # the file's name, the Ollama model, or the package
    sha256: str
    quantization: str  # the GGUF's own: Q4_1, Q8_0, F16...
    architecture: str  # llama, qwen2, mistral...

    def describe(self) -> str:
        return f"{self.name} ({self.quantization} GGUF, sha256 {self.sha256[:12]})"


@dataclass(frozen=True)
class GgufHeader:
    architecture: str
    quantization: str
    name: str  # general.name, if it has one


def read_header(path: Path) -> GgufHeader:
    """The file's architecture and quantization, from its header; GgufUnreadable if it is
    not a GGUF, or one of an architecture transformers cannot load."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001  (any parse failure: not a GGUF we can read)
        raise GgufUnreadable(
            tr("{name} is not a GGUF file that can be read ({error})", name=path.name, error=exc)
        ) from exc
    architecture = _text(reader, "general.architecture")
    file_type = _number(reader, "general.file_type")
    header = GgufHeader(
        architecture=architecture or "unknown",
        quantization=FILE_TYPES.get(file_type if file_type is not None else -1, "unknown"),
        name=_text(reader, "general.name") or path.name,
    )
    supported = supported_architectures()
    if header.architecture not in supported:
        raise GgufUnreadable(
            tr(
                "{name} holds a {architecture} model, which transformers cannot read from "
                "GGUF (it reads {supported}); use the model's safetensors release as a "
                "directory, or a GGUF of a supported architecture",
                name=path.name,
                architecture=header.architecture,
                supported=", ".join(sorted(supported)),
            )
        )
    return header


def supported_architectures() -> set[str]:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"}


@lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, modified_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    """The file's SHA-256, read once per (path, size, modification time) in a process."""
    stat = path.stat()
    return _sha256_of(str(path), stat.st_size, stat.st_mtime_ns)


def gguf_model_dir(
    path: Path,
    *,
    cache_dir: Path,
    precision: str,
    kind: str = "gguf",
    name: str | None = None,
    read: bool = True,
) -> Path:
    """The model directory made from the GGUF at `path` (made once: about 25 s for a
    135M model on 2 CPU cores); the directory's name depends only on the file's contents
    and the precision. With `read` False a file not read yet is checked by its header
    and GgufNotReadYet raised."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {PRECISIONS}")
    precision = "fp16" if precision == "fp16" else "bf16"  # what the cache holds
    if not path.is_file():
        raise GgufUnreadable(tr("{name} is not a file on the server", name=str(path)))
    sha = sha256_of(path)
    target = cache_dir / f"gguf-{sha[:16]}-{precision}"
    if (target / "config.json").is_file():
        return target
    header = read_header(path)
    source = GgufSource(kind, name or path.name, sha, header.quantization, header.architecture)
    if not read:
        raise GgufNotReadYet(
            tr(
                "{source} is read into the model cache once, by the first job or "
                "question on it (about half a minute for a small model)",
                source=source.describe(),
            )
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".gguf-", dir=cache_dir))
    try:
        started = time.monotonic()
        logger.info(
            "Reading {} into the model cache ({}): once, the first job or question on it "
            "waits for this",
            source.describe(),
            precision,
        )
        _convert(path, staging, precision)
        meta = {"name": name or path.name, "source": asdict(source)}
        (staging / "qatune.json").write_text(json.dumps(meta, indent=2))
        try:
            os.rename(staging, target)  # atomic; another process may have won the race
        except OSError:
            if not (target / "config.json").is_file():
                raise
        logger.info("{} is ready in {:.0f} s", source.describe(), time.monotonic() - started)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def source_of(model_dir: Path) -> GgufSource | None:
    """Where a cached model directory came from, if from a GGUF."""
    meta = model_dir / "qatune.json"
    if not meta.is_file():
        return None
    raw = json.loads(meta.read_text()).get("source")
    return GgufSource(**raw) if isinstance(raw, dict) else None


def _convert(path: Path, directory: Path, precision: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from app.ml.precision import DTYPES

    dtype = DTYPES[precision]
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    # fp32: transformers dequantizes GGUF blocks fastest into it; cast once, below
    read = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    settings = {k: v for k, v in read.config.to_dict().items() if k != "quantization_config"}
    config = AutoConfig.for_model(**settings)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    weights = {key: tensor.to(dtype) for key, tensor in read.state_dict().items()}
    del read
    model.load_state_dict(weights, assign=True, strict=True)
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    if not tokenizer.chat_template:
        raise GgufUnreadable(
            tr(
                "{name} has no chat template; use the GGUF of an instruct or chat model",
                name=path.name,
            )
        )


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    return None if field is None or not field.data else field.parts[field.data[0]]


def _text(reader: Any, key: str) -> str | None:
    value = _field(reader, key)
    return None if value is None else bytes(value).decode(errors="replace")


def _number(reader: Any, key: str) -> int | None:
    value = _field(reader, key)
    return None if value is None else int(value[0])
