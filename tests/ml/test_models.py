"""Where a model name may be read from: never a directory the name merely happens to match."""

from pathlib import Path

import pytest

from app.ml.models import ModelUnavailable, resolve_model_dir
from tests.conftest import ROOT


def test_a_relative_name_is_a_hub_id_never_a_server_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert (ROOT / "app" / "ml").is_dir()  # a/b-shaped, and a directory right here
    with pytest.raises(ModelUnavailable, match="not cached") as refused:
        resolve_model_dir("app/ml", cache_dir=tmp_path, offline=True)
    assert "does not exist on the server" not in str(refused.value)


def test_absolute_and_configured_paths_are_read_from_disk(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = next(model_cache.iterdir())
    assert resolve_model_dir(str(built), cache_dir=tmp_path, offline=True) == built
    with pytest.raises(ModelUnavailable, match="does not exist"):
        resolve_model_dir(str(tmp_path / "nope"), cache_dir=tmp_path, offline=True)
    link = tmp_path / "models-here"
    link.symlink_to(built)
    configured = "models-here"
    monkeypatch.chdir(tmp_path)
    assert resolve_model_dir(
        configured, cache_dir=tmp_path, offline=True, configured=[configured]
    ) == Path(configured)


@pytest.mark.parametrize("name", ["../x", "not a model", "a/b/c", "~/models"])
def test_anything_else_is_refused_without_touching_the_disk(tmp_path: Path, name: str) -> None:
    with pytest.raises(
        ModelUnavailable, match="use smollm2-135m-instruct or builtin:tiny, a hub id"
    ):
        resolve_model_dir(name, cache_dir=tmp_path, offline=True)


def test_the_lm_head_of_last_positions_is_one_matmul_not_a_weight_copy_per_row(
    model_cache: Path,
) -> None:
    """generate's prefill asks the head for hidden[:, -1:] (strided): without the loader's
    hook torch's matmul expands the head's weight into a bmm, one copy per row."""
    import torch
    from torch.profiler import profile

    from app.ml.builtin import ensure_builtin_model
    from app.ml.models import load_causal_lm

    model = load_causal_lm(ensure_builtin_model(model_cache), dtype=torch.bfloat16, device="cpu")
    model.requires_grad_(False)  # frozen, as under peft: matmul only folds a strided input
    # into one mm by itself when the weight needs a gradient
    hidden = torch.randn(8, 12, model.config.hidden_size, dtype=torch.bfloat16)
    with torch.no_grad(), profile() as trace:
        logits = model.get_output_embeddings()(hidden[:, -1:, :])
    ops = {event.key for event in trace.key_averages()}
    assert "aten::bmm" not in ops and "aten::mm" in ops
    expected = hidden[:, -1:, :].contiguous() @ model.get_output_embeddings().weight.T
    assert torch.equal(logits, expected)


@pytest.mark.parametrize("kind", ["packaged", "gguf"])
def test_auto_starts_a_packaged_model_at_the_rate_measured_for_it(
    tmp_path: Path, model_cache: Path, kind: str
) -> None:
    """Read from qatune's table whenever the directory was made (one made before the
    measurement carries none); the same file given as a plain GGUF gets the common rate."""
    import json
    import shutil
    from dataclasses import asdict

    from app.core.names import SMOLLM2
    from app.ml.builtin import builtin_dir
    from app.ml.data import data_facts, encode_pairs
    from app.ml.gguf_bases import GgufSource
    from app.ml.hyperparameters import DEFAULT_LEARNING_RATE, HyperparameterRequest, resolve
    from app.ml.models import load_tokenizer, read_model_facts
    from app.ml.packaged import PACKAGED
    from tests.conftest import training_pairs

    directory = tmp_path / "cached"
    shutil.copytree(builtin_dir(model_cache), directory)
    model = PACKAGED[SMOLLM2]
    source = GgufSource(kind, model.distribution, model.file_sha256, "Q4_1", "llama")
    (directory / "qatune.json").write_text(json.dumps({"source": asdict(source)}))

    facts = read_model_facts(directory)
    measured = model.recommended.learning_rate
    assert measured is not None and measured != DEFAULT_LEARNING_RATE
    encoded, _ = encode_pairs(load_tokenizer(directory), training_pairs(), 512)
    resolved = resolve(
        HyperparameterRequest(),
        data=data_facts(encoded),
        max_positions=facts.shape.max_positions,
        recommended=facts.recommended,
    )
    assert resolved.learning_rate == (measured if kind == "packaged" else DEFAULT_LEARNING_RATE)


@pytest.mark.parametrize(
    ("repo", "measured"), [("HuggingFaceTB/SmolLM2-135M-Instruct", True), ("org/Other", False)]
)
def test_a_packaged_model_downloaded_from_its_hub_gets_its_measured_rate_too(
    tmp_path: Path, repo: str, measured: bool
) -> None:
    """The hub's cache lays a model out as models--org--name/snapshots/revision."""
    import json

    from app.core.names import SMOLLM2
    from app.ml.models import hub_id_of, read_model_facts
    from app.ml.packaged import PACKAGED

    directory = tmp_path / f"models--{repo.replace('/', '--')}" / "snapshots" / "0123abc"
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(
        json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128})
    )  # fmt: skip
    assert hub_id_of(directory) == repo
    assert hub_id_of(tmp_path) is None
    rate = read_model_facts(directory).recommended.learning_rate
    assert rate == (PACKAGED[SMOLLM2].recommended.learning_rate if measured else None)


def test_the_layers_lora_can_wrap_are_read_from_the_config_alone(
    model_cache: Path, tmp_path: Path
) -> None:
    """A job's named layers are checked against these when it is created: built on the
    meta device, no weight read; an architecture transformers cannot build is not known
    (None: the check is left to the training) rather than an error."""
    from app.ml.models import adaptable_layers

    tiny = resolve_model_dir("builtin:tiny", cache_dir=model_cache, offline=True)
    layers = adaptable_layers(tiny)
    assert layers is not None
    assert "model.layers.0.self_attn.q_proj" in layers and "lm_head" in layers
    assert not any(name.endswith("input_layernorm") for name in layers)  # not wrappable
    strange = tmp_path / "strange"
    strange.mkdir()
    (strange / "config.json").write_text('{"model_type": "no-such-architecture"}')
    assert adaptable_layers(strange) is None
