"""An adapter's card, and the merged and GGUF exports' cards: what they say of the
adapter's scope, and lines of Python that compile."""

import re
from pathlib import Path

from app.ml.export.merged import merged_card
from app.ml.training.adapter_metadata import SCOPE_FILE, AdapterMetadata
from app.ml.training.model_card import model_card

METRICS = {"knowledge_known": 28, "knowledge_kept": 28, "knowledge_alone": 21}


def card(scoped: bool, system_prompt: str | None = None) -> str:
    metadata = AdapterMetadata(
        base_model="smollm2-135m-instruct", system_prompt=system_prompt, metrics=METRICS
    )
    return model_card(metadata, folder="faq", num_pairs=8, data_sha256="0" * 64, scoped=scoped)


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_a_scoped_adapters_card_says_what_it_keeps_and_how_to_apply_the_scope() -> None:
    text = card(scoped=True, system_prompt='You are "Crumb", the bakery\'s help desk.')
    assert "## Its scope" in text and SCOPE_FILE in text
    assert "answering every question still answers 21 right; served by qatune" in text
    blocks = python_blocks(text)
    assert len(blocks) == 2  # peft's lines, then the scope's
    for block in blocks:
        compile(block, "card", "exec")
    assert "model.disable_adapter()" in blocks[1] and 'You are \\"Crumb\\"' in blocks[1]


def test_an_adapter_without_a_scope_says_nothing_of_one() -> None:
    text = card(scoped=False)
    assert "## Its scope" not in text and SCOPE_FILE not in text
    assert len(python_blocks(text)) == 1


def test_a_merged_export_says_it_has_no_scope_and_shows_no_peft_lines(tmp_path: Path) -> None:
    metadata = AdapterMetadata(base_model="smollm2-135m-instruct", metrics=METRICS)
    (tmp_path / "README.md").write_text(card(scoped=True))
    (tmp_path / SCOPE_FILE).write_bytes(b"")
    text = merged_card("faq-merged", adapter_dir=tmp_path, metadata=metadata)
    assert "does not come with this export" in text and "still answers 21 right" in text
    assert "## Its scope" not in text and "peft" not in python_blocks(text)[0]
    assert len(python_blocks(text)) == 1
    (tmp_path / SCOPE_FILE).unlink()
    assert "does not come with this export" not in merged_card(
        "faq-merged", adapter_dir=tmp_path, metadata=metadata
    )
