"""Adapters without training: random LoRA weights, saved as qatune saves a trained one.

For the serving benchmark and the engine's tests, which need several distinct adapters
of one base in seconds; what they answer is noise, but each answers differently.
"""

from pathlib import Path

import torch

from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.training.adapter_files import save_adapter
from app.ml.training.adapter_metadata import AdapterMetadata, now_iso

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def random_adapter(
    model_dir: Path, target: Path, *, base_model: str, seed: int, rank: int = 16
) -> Path:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
    config = LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules=TARGETS, init_lora_weights=False
    )
    peft_model = get_peft_model(model, config)
    metadata = AdapterMetadata(base_model=base_model, created_at=now_iso())
    return save_adapter(peft_model, load_tokenizer(model_dir), target, metadata)
