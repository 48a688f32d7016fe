"""What makes an adapter usable outside qatune: a base model name that resolves elsewhere,
and a model card that says what it is and how to load it.

`base_model_name_or_path` in adapter_config.json is what peft's AutoPeftModel loads:
the hub id a job trained on, or for the built-in model the directory name that
`qatune export-base builtin:tiny` writes (never a path on the server).
"""

import hashlib
import json
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from app.ml.builtin import BUILTIN_TINY, PORTABLE_NAME, is_builtin
from app.ml.packaged import PACKAGED, is_packaged
from app.ml.pairs import QAPair
from app.ml.quantization import LABELS
from app.ml.training.adapter_metadata import SCOPE_FILE, AdapterMetadata


def portable_base_name(base_model: str) -> str:
    """The name a user's own peft code loads the base by (see the module's docstring): the
    hub id of a packaged model, a GGUF file's own name (never its path on the server)."""
    if is_builtin(base_model):
        return PORTABLE_NAME
    if is_packaged(base_model):
        return PACKAGED[base_model].hub_id
    if Path(base_model).suffix.lower() == ".gguf":
        return Path(base_model).name
    return base_model.removeprefix("ollama:")


def data_fingerprint(pairs: Sequence[QAPair]) -> str:
    """sha256 of the training pairs as JSON lines: the same data gives the same hash."""
    digest = hashlib.sha256()
    for pair in pairs:
        record = {"system": None} | pair.to_record()  # as before conversations: system always
        digest.update(json.dumps(record, ensure_ascii=False, sort_keys=True).encode() + b"\n")
    return digest.hexdigest()


def qatune_version() -> str:
    try:
        return version("qatune")
    except PackageNotFoundError:
        return "unknown"


def _share(value: Any) -> str:
    return "—" if value is None else f"{value:.1%}"


def _figure(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def load_snippet(folder: str, system_prompt: str | None, *, with_peft: bool) -> str:
    """The Python that loads a card's folder and asks it a question, greedy as qatune does:
    the adapter with peft's auto class, a merged model with transformers'."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    question = {"role": "user", "content": "your question"}
    messages = json.dumps([*system, question], ensure_ascii=False)
    loader = "AutoPeftModelForCausalLM" if with_peft else "AutoModelForCausalLM"
    imports = (
        f"from peft import {loader}\nfrom transformers import AutoTokenizer"
        if with_peft
        else f"from transformers import {loader}, AutoTokenizer"
    )
    return f"""```python
{imports}
model = {loader}.from_pretrained("{folder}")
tokenizer = AutoTokenizer.from_pretrained("{folder}")
messages = {messages}
inputs = tokenizer.apply_chat_template(
    messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
)
output = model.generate(**inputs, max_new_tokens=256, do_sample=False)
print(tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True))
```"""


def scoped_snippet(folder: str, system_prompt: str | None) -> str:
    """The Python that asks the adapter as qatune serves it: its scope decides, from the
    base's features of the question (app/ml/scope.py), whether the adapter or the base
    answers; the base is asked as the question was written, without the adapter's system
    prompt."""
    system = (
        f'[{{"role": "system", "content": {json.dumps(system_prompt, ensure_ascii=False)}}}]'
        if system_prompt
        else "[]"
    )
    return f"""```python
from contextlib import nullcontext

import torch
from peft import AutoPeftModelForCausalLM
from safetensors.torch import load_file
from transformers import AutoTokenizer

model = AutoPeftModelForCausalLM.from_pretrained("{folder}")
tokenizer = AutoTokenizer.from_pretrained("{folder}")
scope = load_file("{folder}/{SCOPE_FILE}")


def in_scope(question):
    \"\"\"The base's last hidden state over the question's own tokens, averaged and
    standardised, scored by the scope's linear classifier.\"\"\"
    ids = tokenizer(question, add_special_tokens=False, return_tensors="pt").input_ids
    with model.disable_adapter(), torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]
    features = (hidden.float().mean(0) - scope["mean"]) / scope["scale"]
    return float(features @ scope["weight"] + scope["bias"]) > 0


def ask(question):
    inside = in_scope(question)
    system = {system} if inside else []
    inputs = tokenizer.apply_chat_template(
        [*system, {{"role": "user", "content": question}}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    with nullcontext() if inside else model.disable_adapter():
        output = model.generate(**inputs, max_new_tokens=256, do_sample=False)
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


print(ask("your question"))
```"""


def kept_figures(metrics: dict[str, Any]) -> str:
    """What the adapter kept of what the base knew, with its scope and without (empty where
    it was not measured)."""
    known, kept = metrics.get("knowledge_known"), metrics.get("knowledge_kept")
    alone = metrics.get("knowledge_alone")
    if not known or kept is None or alone is None:
        return ""
    return (
        f"Of the {known} general questions the base answered right, the adapter answering "
        f"every question still answers {alone} right; served by qatune, its scope applied, "
        f"{kept}."
    )


def scope_section(folder: str, metadata: AdapterMetadata) -> str:
    """The adapter card's part on its scope: what qatune does with it, and how to do the
    same with peft."""
    return f"""## Its scope: the questions it answers

qatune serves this adapter with its scope (`{SCOPE_FILE}`): a question unlike the ones it
was trained on, a general question or small talk, is answered by the base model alone, as
before training. Loaded as above, the adapter answers every question.
{kept_figures(metadata.metrics)} To answer as qatune does:

{scoped_snippet(folder, metadata.system_prompt)}

"""


def no_scope_note(metadata: AdapterMetadata) -> str:
    """For a merged or GGUF export, which answers every question with the adapter."""
    return (
        "\nThe adapter's scope does not come with this export: qatune answers a question "
        "unlike the ones it was trained on with the base model alone, and this model answers "
        f"every question with the adapter merged in. {kept_figures(metadata.metrics)} The "
        "adapter's own download applies the scope with peft (its README).\n"
    )


def _base_weights(quantization: str) -> str:
    if quantization == "none":
        return "as stored (the training precision)"
    return (
        f"{LABELS[quantization]} (QLoRA, bitsandbytes); load the base the same way to get "  # type: ignore[index]
        "the answers it learned (qatune serves it so): on the base as stored, as merged "
        "exports have it, answers can differ"
    )


def model_card(
    metadata: AdapterMetadata, *, folder: str, num_pairs: int, data_sha256: str, scoped: bool
) -> str:
    """README.md for the adapter directory: what it was trained on and how, what it
    measured, and the lines that load it with peft (and apply its scope, if it has one)."""
    base_model, metrics = metadata.base_model, metadata.metrics
    base = portable_base_name(base_model)
    source = metadata.base_source
    rows = [
        ("base model", f"`{base}` (trained as `{base_model}`)"),
        ("base read from", f"{source['name']}, a {source['quantization']} GGUF (sha256 "
         f"`{source['sha256']}`), dequantized" if source else "its safetensors"),
        ("started from", f"`{metadata.started_from}`, trained further (its weights included "
         "here: this adapter alone goes on the base)" if metadata.started_from else "a new "
         "adapter"),
        ("training data", f"{num_pairs} QA pairs, sha256 `{data_sha256}`"),
        ("device, precision", f"{metrics.get('device', '—')}, {metrics.get('dtype', '—')}"),
        ("base weights in training", _base_weights(metadata.quantization)),
        ("epochs, steps", f"{_figure(metrics.get('epochs'))}, {metrics.get('train_steps', '—')}"),
        ("training loss (final, mean)", f"{_figure(metrics.get('final_loss'))}, "
         f"{_figure(metrics.get('train_loss'))}"),
        ("training answers exact", _share(metrics.get("train_exact_match"))),
        ("validation loss", _figure(metrics.get("eval_loss"))),
        ("validation exact match", _share(metrics.get("eval_exact_match"))
         + (f" of {metrics['eval_examples']}" if metrics.get("eval_examples") else "")),
        ("trained", metadata.created_at),
        ("qatune", qatune_version()),
    ]  # fmt: skip
    resolved = metadata.hyperparameters.items()
    settings = "\n".join(f"| `{k}` | `{json.dumps(v)}` |" for k, v in resolved)
    return f"""---
base_model: {base}
library_name: peft
tags:
- lora
- qatune
---

# {folder}: a LoRA adapter trained by qatune

A LoRA adapter for `{base}`, trained on question-answer pairs. {_obtain(base_model, base)}

| | |
|---|---|
{chr(10).join(f"| {k} | {v} |" for k, v in rows)}

## Load it with peft

{load_snippet(folder, metadata.system_prompt, with_peft=True)}

Greedy decoding, as qatune answers; the chat template it trained with is in this folder.

{scope_section(folder, metadata) if scoped else ""}## Hyperparameters, as resolved

| name | value |
|---|---|
{settings}

`evaluation.json` holds the questions qatune asked after training, with the expected, the
tuned and the base model's answers.
"""


def _obtain(base_model: str, base: str) -> str:
    """Where a user gets the base the adapter goes on."""
    if is_builtin(base_model):
        return (
            f"`{base}` is qatune's built-in model: write it with `qatune export-base "
            f"{BUILTIN_TINY} {base}` in the directory you run from."
        )
    if is_packaged(base_model):
        return (
            f"`{base}` is on the Hugging Face Hub; qatune read it from the GGUF of the "
            f"package `{PACKAGED[base_model].distribution}`, whose weights are a 4-bit "
            "quantization of the same model: the hub's full-precision weights answer a "
            "little differently."
        )
    if base_model.lower().endswith(".gguf") or base_model.startswith("ollama:"):
        return (
            f"The base is the GGUF `{base}`: load it with transformers' "
            f'`AutoModelForCausalLM.from_pretrained(folder, gguf_file="{base}")`, or use '
            "the model's safetensors release."
        )
    return (
        f"`{base}` is the base model's id on the Hugging Face Hub (or the local directory it "
        "was trained from)."
    )
