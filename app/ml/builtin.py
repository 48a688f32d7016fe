"""`builtin:tiny`: a small Qwen2-shaped model made by code, so that everything works offline.

It knows nothing until trained. Its weights are random but fixed (seeded), drawn with a
wider spread than Qwen2's default (std 0.1, not 0.02): the random network then mixes its
input into rich enough features that a LoRA adapter alone can teach it to answer, where
with the default spread it barely learns (measured: 0 of 30 pairs vs 30 of 30).
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

from app.core.names import BUILTIN_TINY

BUILTIN_PREFIX = "builtin:"
BUILTIN_DESCRIPTION = (
    "Demo model made locally (3.2M parameters, byte-level). It knows nothing until trained; "
    "use it to try qatune, not for real answers."
)
# v2: v1's tokenizer plus one merge that never fires (see _write_model); same weights, same
# token ids for every text, so v1 adapters load on v2 unchanged.
_VERSION = "v2"
# What an adapter names its base outside qatune: `qatune export-base builtin:tiny` writes it.
PORTABLE_NAME = f"qatune-builtin-tiny-{_VERSION}"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Hyperparameters that suit this model; "auto" picks them (see hyperparameters.py).
RECOMMENDED = {"learning_rate": 3e-3, "lora_r": 16, "lora_dropout": 0.0, "examples_seen": 600}


def is_builtin(name: str) -> bool:
    return name.startswith(BUILTIN_PREFIX)


def builtin_dir(cache_dir: Path, name: str = BUILTIN_TINY) -> Path:
    if name != BUILTIN_TINY:
        raise ValueError(f"Unknown built-in model {name!r}; the built-in model is {BUILTIN_TINY}")
    return cache_dir / f"builtin-tiny-{_VERSION}"


def ensure_builtin_model(cache_dir: Path) -> Path:
    """Create the model once (about a second); later calls return the cached directory."""
    target = builtin_dir(cache_dir)
    if (target / "config.json").exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".builtin-", dir=cache_dir))
    try:
        _write_model(staging)
        try:
            os.rename(staging, target)  # atomic; another process may have won the race
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _write_model(directory: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    # Byte-level vocabulary: any UTF-8 text, Chinese included, round-trips, one token a byte.
    # llama.cpp refuses a BPE vocabulary without merges, so it has one that never fires:
    # bytes C0 80, which no UTF-8 text contains (C0 is never valid there).
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    byte_char = _byte_level_chars()
    never = (byte_char[0xC0], byte_char[0x80])
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab |= {token: len(alphabet) + i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab["".join(never)] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[never]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(SPECIAL_TOKENS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)

    config = Qwen2Config(
        vocab_size=320,  # 256 bytes + 3 specials + 1 merge, rounded up to a multiple of 64
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.1,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(20261122)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(directory, safe_serialization=True)
    (directory / "qatune.json").write_text(
        json.dumps({"name": BUILTIN_TINY, "recommended": RECOMMENDED}, indent=2)
    )


def _byte_level_chars() -> dict[int, str]:
    """GPT-2's byte-to-character table, which the ByteLevel pre-tokenizer uses."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = {b: chr(b) for b in printable}
    extra = (b for b in range(256) if b not in chars)
    chars |= {b: chr(256 + i) for i, b in enumerate(extra)}
    return chars
