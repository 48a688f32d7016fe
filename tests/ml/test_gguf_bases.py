"""GGUF files as bases: a GGUF written by qatune's own export, found by path or in Ollama's
store, read once into the cache and answering as the model it was exported from; an
architecture transformers cannot read from GGUF refused with what to do."""

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.ml.builtin import ensure_builtin_model
from app.ml.data import prompt_ids
from app.ml.export.gguf import export_gguf
from app.ml.export.llama_cpp import default_converter_dir
from app.ml.gguf_bases import GgufNotReadYet, GgufUnreadable, read_header, source_of
from app.ml.models import ModelUnavailable, load_causal_lm, load_tokenizer, resolve_model_dir
from bench.adapters import random_adapter

CONVERTER = default_converter_dir()
QUESTIONS = ["What is the capital of France?", "熊猫吃什么？", "How are you?"]
needs_converter = pytest.mark.skipif(
    not (CONVERTER / "convert_hf_to_gguf.py").is_file(),
    reason="llama.cpp's converter is not fetched (`qatune fetch-llama-cpp`; make setup does it)",
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The built-in model with an adapter, merged and exported by qatune as an f16 GGUF;
    and the merged model's own directory (the reference)."""
    root = tmp_path_factory.mktemp("gguf-base")
    base = ensure_builtin_model(root / "models")
    adapter = random_adapter(base, root / "adapter", base_model="builtin:tiny", seed=3)
    target = root / "export"
    target.mkdir()
    export_gguf(
        base, adapter, target, outtype="f16", converter=CONVERTER, with_base=False,
        progress=lambda share, what: None,
    )  # fmt: skip
    return target / "model-f16.gguf", root


def greedy(model_dir: Path, tokenizer: Any) -> list[list[int]]:
    """Greedy answers' token ids: the random model writes ids of the vocabulary's padding,
    which the tokenizer the GGUF carries names ([PAD290]) and the built-in one does not."""
    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
    answers = []
    for question in QUESTIONS:
        ids = prompt_ids(tokenizer, [{"role": "user", "content": question}])
        out = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)
        answers.append(out[0, len(ids) :].tolist())
    return answers


@needs_converter
def test_a_gguf_exported_by_qatune_is_a_base_that_answers_as_its_model(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    gguf, root = exported
    header = read_header(gguf)
    assert (header.architecture, header.quantization) == ("qwen2", "F16")
    cache = tmp_path / "cache"
    # A check (GET /models/check) reads the header only: it answers at once, reading nothing
    with pytest.raises(GgufNotReadYet, match="read into the model cache once"):
        resolve_model_dir(str(gguf), cache_dir=cache, offline=True, precision="fp16",
                          read_gguf=False)  # fmt: skip
    assert not cache.exists() or not any(cache.iterdir())
    model_dir = resolve_model_dir(str(gguf), cache_dir=cache, offline=True, precision="fp16")
    again = resolve_model_dir(str(gguf), cache_dir=cache, offline=True, precision="fp16",
                              read_gguf=False)  # fmt: skip
    assert again == model_dir  # read once: the next job (and check) finds it
    source = source_of(model_dir)
    assert source is not None and source.quantization == "F16" and source.kind == "gguf"
    assert source.sha256 == hashlib.sha256(gguf.read_bytes()).hexdigest()
    # The merged model in f16, as the GGUF holds it: the same answers, token for token
    merged = root / "merged-f16"
    if not merged.exists():
        from peft import PeftModel

        base = load_causal_lm(ensure_builtin_model(root / "models"), dtype=torch.float32,
                              device="cpu")  # fmt: skip
        model = PeftModel.from_pretrained(base, root / "adapter").merge_and_unload()
        model.half().float().save_pretrained(merged)
        load_tokenizer(ensure_builtin_model(root / "models")).save_pretrained(merged)
    assert load_tokenizer(model_dir).encode("熊猫吃什么？") == load_tokenizer(merged).encode(
        "熊猫吃什么？"
    )
    tokenizer = load_tokenizer(merged)
    assert greedy(model_dir, tokenizer) == greedy(merged, tokenizer)


@needs_converter
def test_an_ollama_model_is_found_through_its_manifest(
    exported: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama's own layout: a manifest naming the GGUF blob by its digest."""
    gguf, _ = exported
    store = tmp_path / "ollama"
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    (store / "blobs").mkdir(parents=True)
    os.link(gguf, store / "blobs" / f"sha256-{digest}")
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "tiny-faq" / "latest"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "config": {
                    "mediaType": "application/vnd.docker.container.image.v1+json",
                    "digest": "sha256:" + "0" * 64,
                    "size": 10,
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.ollama.image.model",
                        "digest": f"sha256:{digest}",
                        "size": gguf.stat().st_size,
                    },
                    {
                        "mediaType": "application/vnd.ollama.image.template",
                        "digest": "sha256:" + "1" * 64,
                        "size": 5,
                    },
                ],
            }
        )  # fmt: skip
    )
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    cache = tmp_path / "cache"
    by_name = resolve_model_dir("ollama:tiny-faq", cache_dir=cache, offline=True)
    by_path = resolve_model_dir(str(gguf), cache_dir=cache, offline=True)
    assert by_name == by_path  # the same file: read once
    assert source_of(by_name) is not None and source_of(by_name).kind == "ollama"  # type: ignore[union-attr]
    with pytest.raises(ModelUnavailable, match="ollama pull llama3.2:1b"):
        resolve_model_dir("ollama:llama3.2:1b", cache_dir=cache, offline=True)


def test_an_architecture_transformers_cannot_read_is_refused_with_what_to_do(
    tmp_path: Path,
) -> None:
    from gguf import GGUFWriter

    path = tmp_path / "rwkv.gguf"
    writer = GGUFWriter(str(path), "rwkv6")
    writer.add_file_type(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GgufUnreadable, match="rwkv6 model, which transformers cannot read"):
        read_header(path)
    with pytest.raises(ModelUnavailable, match="safetensors release"):
        resolve_model_dir(str(path), cache_dir=tmp_path / "cache", offline=True)
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(ModelUnavailable, match="not a GGUF file"):
        resolve_model_dir(str(not_gguf), cache_dir=tmp_path / "cache", offline=True)
