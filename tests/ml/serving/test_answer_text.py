"""The text of generated tokens: exactly the tokenizer's decode for text, and bytes that
are not text shown as such (an untrained model writes many), never replacement marks."""

from pathlib import Path
from typing import Any

import pytest

from app.ml.serving.text import answer_text


@pytest.fixture(scope="module")
def tokenizer(model_cache: Path) -> Any:
    from app.ml.models import load_tokenizer, resolve_model_dir

    return load_tokenizer(resolve_model_dir("builtin:tiny", cache_dir=model_cache, offline=True))


def test_text_is_the_tokenizers_own_decode(tokenizer: Any) -> None:
    for text in ("The capital of France is Paris.", "熊猫吃竹子。", "mixed 中文 and émoji 🐼"):
        ids = tokenizer.encode(text)
        assert (
            answer_text(tokenizer, ids) == tokenizer.decode(ids, skip_special_tokens=True) == text
        )


def test_bytes_that_are_not_text_are_shown_as_such(tokenizer: Any) -> None:
    panda = tokenizer.encode("熊")  # three bytes: e7 86 8a
    assert len(panda) == 3
    cut = [panda[0], *tokenizer.encode("A")]  # e7, then not a continuation
    assert tokenizer.decode(cut) == "\ufffdA"  # what decode says
    assert answer_text(tokenizer, cut) == "\\xe7A"
    # Streaming: a character whose bytes have not all come is held back, then shown whole.
    assert answer_text(tokenizer, panda[:2], final=False) == ""
    assert answer_text(tokenizer, panda, final=False) == "熊"
    assert answer_text(tokenizer, panda[:2]) == "\\xe7\\x86"  # the end: what came is shown
    # Special tokens (the end of a turn) are not text; ids past the vocabulary are nothing.
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert answer_text(tokenizer, [*tokenizer.encode("ok"), end, 10_000]) == "ok"
