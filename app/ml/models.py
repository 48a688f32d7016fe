"""Find and load a base model: `builtin:tiny`, a packaged pretrained model
(`smollm2-135m-instruct`), a local directory or GGUF file, an Ollama model, or a hub id."""

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from loguru import logger

from app.core.language import tr
from app.core.names import BUILTIN_TINY, HUB_ID
from app.ml.builtin import ensure_builtin_model, is_builtin
from app.ml.gguf_bases import GgufUnreadable, gguf_model_dir, source_of
from app.ml.hyperparameters import Recommended
from app.ml.ollama_store import blob_of, is_ollama
from app.ml.packaged import (
    is_packaged,
    packaged_model_dir,
    recommended_for,
    recommended_for_hub,
)
from app.ml.quantization import (
    Quantization,
    load_options,
    quiet_library_warnings,
    source_pages_released,
)
from app.ml.serving.requests import AskFailed
from app.ml.shapes import ModelShape


class ModelUnavailable(AskFailed, RuntimeError):
    """The base model cannot be loaded; the message says what to do."""


def is_local_path(name: str, configured: Sequence[str] = ()) -> bool:
    """A name that is read from the server's disk: an absolute path, a configured entry or
    an Ollama model.

    A relative name like `a/b` is a hub id, never a directory of the server's working
    directory. Who may name a local path is checked where jobs are made (only admins,
    unless the entry is configured).
    """
    return name in configured or Path(name).is_absolute() or is_ollama(name)


def resolve_model_dir(
    name: str,
    *,
    cache_dir: Path,
    offline: bool,
    configured: Sequence[str] = (),
    precision: str = "bf16",
    read_gguf: bool = True,
) -> Path:
    """A local directory holding the model's files, downloading a hub id only if allowed;
    a GGUF (a packaged model's, a file's, Ollama's) is read into the cache in `precision`
    (the device plan's) the first time, or, with `read_gguf` False, GgufNotReadYet."""
    try:
        if is_packaged(name):
            return packaged_model_dir(
                name, cache_dir=cache_dir, precision=precision, read=read_gguf
            )
        if is_ollama(name):
            return gguf_model_dir(
                blob_of(name), cache_dir=cache_dir, precision=precision, kind="ollama",
                name=name.removeprefix("ollama:"), read=read_gguf,
            )  # fmt: skip
        if is_local_path(name, configured) and Path(name).suffix.lower() == ".gguf":
            return gguf_model_dir(
                Path(name), cache_dir=cache_dir, precision=precision, read=read_gguf
            )
    except GgufUnreadable as exc:
        raise ModelUnavailable(str(exc)) from exc
    if is_builtin(name):
        if name != BUILTIN_TINY:
            raise ModelUnavailable(
                tr(
                    "Unknown built-in model {name!r}; use {builtin}",
                    name=name,
                    builtin=BUILTIN_TINY,
                )
            )
        return ensure_builtin_model(cache_dir)
    if is_local_path(name, configured):
        local = Path(name)
        if not (local / "config.json").is_file():
            raise ModelUnavailable(
                tr(
                    "Model directory {name} does not exist on the server or has no config.json",
                    name=name,
                )
            )
        return local
    if not HUB_ID.match(name):
        raise ModelUnavailable(
            tr(
                "{name!r} is not a model qatune knows: use smollm2-135m-instruct or builtin:tiny, "
                "a hub id like Qwen/Qwen2.5-0.5B-Instruct, or a configured model",
                name=name,
            )
        )
    return _hub_snapshot(name, offline=offline)


def download_advice(repo_id: str) -> str:
    return tr(
        "download it on a machine with internet access (`huggingface-cli download {repo_id}`) "
        "and copy the directory here, then use its path as base_model; or use builtin:tiny",
        repo_id=repo_id,
    )


def _hub_snapshot(repo_id: str, *, offline: bool) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
    except HFValidationError as exc:
        raise ModelUnavailable(
            tr("{repo_id!r} is not a valid model id or directory", repo_id=repo_id)
        ) from exc
    except Exception:  # noqa: BLE001  (not cached: try the network below)
        pass
    advice = download_advice(repo_id)
    if offline:
        raise ModelUnavailable(
            tr(
                "Model {repo_id} is not cached and QATUNE_OFFLINE is set: {advice}",
                repo_id=repo_id,
                advice=advice,
            )
        )
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as exc:  # noqa: BLE001  (any network or hub failure means the same to a user)
        raise ModelUnavailable(
            tr(
                "Model {repo_id} is not cached and the hub could not be reached ({error}): "
                "{advice}",
                repo_id=repo_id,
                error=type(exc).__name__,
                advice=advice,
            )
        ) from exc


def cached_hub_models() -> list[str]:
    """The hub models downloaded here (the hub's cache) that a job could start from: those
    with a config.json. Read from the disk alone; an unreadable cache lists none."""
    from huggingface_hub import constants, scan_cache_dir

    try:  # the cache's place as downloads read it, now (scan_cache_dir's own is its import's)
        repos = scan_cache_dir(constants.HF_HUB_CACHE).repos
    except Exception:  # noqa: BLE001  (no cache yet, or one we cannot read: nothing cached)
        return []
    return sorted(
        repo.repo_id
        for repo in repos
        if repo.repo_type == "model"
        and any(file.file_name == "config.json" for rev in repo.revisions for file in rev.files)
    )


def hub_answer(repo_id: str, *, timeout_s: float) -> str | None:
    """Whether the hub has the model, asked once: None if it does; otherwise why not
    (unreachable from here, no such model, gated)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo_id, timeout=timeout_s)
    except GatedRepoError:
        return tr(
            "{repo_id} is gated on the hub: accept its terms and log in where you download it",
            repo_id=repo_id,
        )
    except RepositoryNotFoundError:
        return tr("the hub has no model {repo_id}: check its spelling", repo_id=repo_id)
    except Exception as exc:  # noqa: BLE001  (any network failure means the same to a user)
        return tr("the hub cannot be reached from here ({error})", error=type(exc).__name__)
    return None


@dataclass(frozen=True)
class ModelFacts:
    """What planning and hyperparameter resolution need to know about a base model."""

    shape: ModelShape
    recommended: Recommended


def hub_id_of(model_dir: Path) -> str | None:
    """The hub id of a model in the hub's cache (models--org--name/snapshots/revision)."""
    repo = model_dir.parent.parent.name
    if model_dir.parent.name != "snapshots" or not repo.startswith("models--"):
        return None
    return repo.removeprefix("models--").replace("--", "/", 1)


def read_model_facts(model_dir: Path) -> ModelFacts:
    """The model's shape, and the settings recommended for it: qatune's measured ones for
    a packaged model (read from its package, or downloaded from its hub), else those its
    directory's qatune.json gives (the built-in model's)."""
    config = json.loads((model_dir / "config.json").read_text())
    source, hub_id = source_of(model_dir), hub_id_of(model_dir)
    recommended: Recommended | None = None
    if source is not None:
        recommended = recommended_for(source)
    elif hub_id is not None:
        recommended = recommended_for_hub(hub_id)
    if recommended is None:
        meta = model_dir / "qatune.json"
        written = json.loads(meta.read_text()).get("recommended", {}) if meta.exists() else {}
        recommended = Recommended.from_json(written)
    return ModelFacts(ModelShape.from_config(config), recommended)


@lru_cache(maxsize=8)
def adaptable_layers(model_dir: Path) -> tuple[str, ...] | None:
    """The full names of the model's layers LoRA can wrap (linear, embedding, convolution),
    from its config on the meta device: no weight is read. None where transformers cannot
    build it so (the training will say what it finds)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.pytorch_utils import Conv1D

    kinds = (torch.nn.Linear, torch.nn.Embedding, torch.nn.Conv1d, torch.nn.Conv2d, Conv1D)
    try:
        config = AutoConfig.from_pretrained(model_dir, trust_remote_code=False)
        with torch.device("meta"):  # this thread's default only
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    except Exception as exc:  # an architecture this transformers does not build
        logger.warning("The layers of {} are not known before training: {}", model_dir, exc)
        return None
    return tuple(name for name, module in model.named_modules() if isinstance(module, kinds))


def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not tokenizer.chat_template:
        raise ModelUnavailable(
            tr(
                "{model_dir} has no chat template; use an instruct/chat model (e.g. "
                "Qwen/Qwen2.5-0.5B-Instruct) whose tokenizer defines one",
                model_dir=model_dir,
            )
        )
    return tokenizer


def load_causal_lm(
    model_dir: Path, *, dtype: Any, device: str, quantization: Quantization = "none"
) -> Any:
    """The model in `dtype` on `device`; with a quantization, its linear layers stored in
    8 or 4 bits by bitsandbytes (quantization.py) and computing in `dtype`."""
    from transformers import AutoModelForCausalLM

    if quantization != "none":
        quiet_library_warnings()
    with source_pages_released() if quantization != "none" else nullcontext():
        model = AutoModelForCausalLM.from_pretrained(
            model_dir,
            dtype=dtype,
            trust_remote_code=False,
            use_safetensors=True,
            # SDPA honours a 4D block-diagonal mask, which packing relies on (checked in tests).
            attn_implementation="sdpa",
            **load_options(quantization, dtype=dtype, device=device),
        )
    # The LM head of a batch's last positions (generate's and the engine's prefill slice
    # hidden[:, -1:]) gets a strided input; with the head frozen (peft), torch's matmul
    # then copies its weight once per row into a bmm: 4.4 GB and ~11 s for 16 rows on
    # Qwen2.5-0.5B's shape. A contiguous input is one mm (docs/benchmarks.md).
    if (head := model.get_output_embeddings()) is not None:
        head.register_forward_pre_hook(_contiguous_input)
    if quantization != "none":
        return model  # loaded onto its device: quantized weights cannot move
    # No device_map: "auto" does not work for MPS, and one device is what we plan for.
    return model.to(device)  # type: ignore[arg-type]


def _contiguous_input(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return (args[0].contiguous(), *args[1:])


@contextmanager
def evaluating(model: Any) -> Iterator[Any]:
    """The model in eval mode (no dropout) for a few forward passes in the middle of a
    training run, then back in the mode it was in."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
