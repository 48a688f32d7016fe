"""Ollama's models as bases: `ollama:NAME[:TAG]` found in Ollama's own store.

Ollama keeps a model as a manifest (models/manifests/<registry>/<namespace>/<name>/<tag>,
JSON) whose layer of media type `application/vnd.ollama.image.model` names the GGUF blob
(models/blobs/sha256-<hex>). The store is `$OLLAMA_MODELS`, else ~/.ollama/models. The name
is read as Ollama reads it: `llama3.2` is library/llama3.2:latest, `me/model:q4` is
me/model:q4 on registry.ollama.ai. Nothing is downloaded: a model not pulled here is said
so, with the command that pulls it.
"""

import json
import os
from pathlib import Path

from app.core.language import tr
from app.ml.gguf_bases import GgufUnreadable

PREFIX = "ollama:"
REGISTRY = "registry.ollama.ai"
MODEL_LAYER = "application/vnd.ollama.image.model"


def is_ollama(name: str) -> bool:
    return name.startswith(PREFIX)


def store() -> Path:
    return Path(os.environ.get("OLLAMA_MODELS") or Path.home() / ".ollama" / "models")


def blob_of(name: str) -> Path:
    """The GGUF file of an Ollama model pulled on this machine; GgufUnreadable if none."""
    model, _, tag = name.removeprefix(PREFIX).partition(":")
    namespace, _, short = model.rpartition("/")
    parts = [REGISTRY, namespace or "library", short, tag or "latest"]
    if any(not part or part in (".", "..") or "/" in part for part in parts[1:]):
        raise GgufUnreadable(tr("{name!r} is not an Ollama model name", name=name))
    manifest = store() / "manifests" / Path(*parts)
    if not manifest.is_file():
        raise GgufUnreadable(
            tr(
                "Ollama has no model {model}:{tag} on this machine (looked in {where}): "
                "`ollama pull {model}:{tag}` there first",
                model=model,
                tag=tag or "latest",
                where=str(store()),
            )
        )
    try:
        layers = json.loads(manifest.read_text()).get("layers", [])
        digest = next(layer["digest"] for layer in layers if layer["mediaType"] == MODEL_LAYER)
    except (ValueError, KeyError, TypeError, StopIteration) as exc:
        raise GgufUnreadable(
            tr("Ollama's manifest of {name} names no model file", name=name)
        ) from exc
    algorithm, _, hexdigest = str(digest).partition(":")
    if algorithm != "sha256" or not hexdigest.isalnum():
        raise GgufUnreadable(tr("Ollama's manifest of {name} names no model file", name=name))
    blob = store() / "blobs" / f"sha256-{hexdigest}"
    if not blob.is_file():
        raise GgufUnreadable(tr("Ollama's blob for {name} is missing: pull it again", name=name))
    return blob
