"""The base model with the adapter merged in: one transformers model, no peft needed.

The weights are merged in the base's own dtype (what LLaMA-Factory's and unsloth's merged
exports do) and saved as safetensors beside the config, the generation config, the
tokenizer and its chat template, and a model card.
"""

import re
import shutil
from pathlib import Path

from app.core.language import said
from app.ml.export import Progress
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.quantization import LABELS
from app.ml.training.adapter_files import EVALUATION
from app.ml.training.adapter_metadata import SCOPE_FILE, AdapterMetadata, read_adapter_metadata
from app.ml.training.model_card import load_snippet, no_scope_note


def export_merged(
    base_dir: Path, adapter_dir: Path, target: Path, *, folder: str, progress: Progress
) -> None:
    """Write the merged model into `target` (an existing empty directory)."""
    from peft import PeftModel

    metadata = read_adapter_metadata(adapter_dir)
    progress(0.05, said("loading the base model"))
    base = load_causal_lm(base_dir, dtype="auto", device="cpu")
    progress(0.4, said("merging the adapter"))
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    progress(0.6, said("writing safetensors"))
    merged.save_pretrained(target, safe_serialization=True, max_shard_size="5GB")
    load_tokenizer(base_dir).save_pretrained(target)
    if (adapter_dir / EVALUATION).is_file():
        shutil.copyfile(adapter_dir / EVALUATION, target / EVALUATION)
    progress(0.9, said("writing the model card"))
    (target / "README.md").write_text(
        merged_card(folder, adapter_dir=adapter_dir, metadata=metadata)
    )


def dequantized_note(quantization: str) -> str:
    """What an export of an adapter trained on a quantized base says about its weights."""
    if quantization == "none":
        return ""
    return (
        f"\nThe adapter was trained on the base in {LABELS[quantization]} (QLoRA); it is "  # type: ignore[index]
        "merged here into the base's own unquantized weights, not the quantized ones, and its "
        "answers can differ from qatune's, which serves it on the quantized base (on the "
        "built-in model, 2 of 30 learned answers survived a 4-bit adapter's merge; 8-bit: "
        "30 of 30). Prefer the adapter on a base quantized the same way.\n"
    )


def scope_note(adapter_dir: Path, metadata: AdapterMetadata) -> str:
    """What an export of an adapter with a scope says: it has none."""
    return no_scope_note(metadata) if (adapter_dir / SCOPE_FILE).is_file() else ""


def merged_card(folder: str, *, adapter_dir: Path, metadata: AdapterMetadata) -> str:
    """README.md: how to load the merged model, then the adapter's card (how it trained)."""
    card = adapter_dir / "README.md"
    trained = card.read_text() if card.exists() else ""
    table = trained.find("| | |")  # from its table on: not its title or its peft intro
    trained = trained[table:] if table >= 0 else ""
    # peft's lines are the adapter's, not this model's
    trained = re.sub(r"## (Load it with peft|Its scope)\b.*?(?=\n## )", "", trained, flags=re.S)
    return f"""---
library_name: transformers
tags:
- qatune
- merged-lora
---

# {folder}: a model fine-tuned by qatune, adapter merged in

A complete transformers model: the base with qatune's LoRA adapter merged into its weights.
It loads without peft, and is what a GGUF conversion or another serving engine starts from.
{dequantized_note(metadata.quantization)}{scope_note(adapter_dir, metadata)}
{load_snippet(folder, metadata.system_prompt, with_peft=False)}

## How the adapter was trained
{trained}"""
