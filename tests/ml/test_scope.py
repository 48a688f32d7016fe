"""An adapter's scope: fitted, saved, and obeyed by the engine, which gives a question outside
it to the base model."""

import json
import random
import shutil
import time
from pathlib import Path

import pytest
import torch

from app.ml.data import prompt_ids
from app.ml.general_prompts import SMALL_TALK
from app.ml.scope import (
    Scope,
    features,
    fit,
    fit_scope,
    load_scope,
    outside_of,
    with_words_dropped,
)
from app.ml.serving.asking import question_ids
from app.ml.serving.engine import Engine
from app.ml.serving.requests import AdapterRef, GenerationRequest, Sampling
from app.ml.training.adapter_metadata import SCOPE_FILE
from tests.ml.serving.test_engine import Collected, adapters, make_engine, model_dir

__all__ = ["adapters", "model_dir"]  # the engine tests' fixtures, used here too


def clusters(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Questions of one kind (near one point) and all sorts of others."""
    generator = torch.Generator().manual_seed(seed)
    centre = torch.randn(64, generator=generator)
    inside = centre + 0.5 * torch.randn(40, 64, generator=generator)
    outside = torch.randn(120, 64, generator=generator)
    return inside, outside


def test_a_fitted_scope_tells_unseen_questions_of_its_kind_from_others() -> None:
    inside, outside = clusters(0)
    scope = fit(inside[:20], outside[:60])
    assert all(scope.inside(inside[20:]))
    assert not any(scope.inside(outside[60:]))


def test_a_scope_saved_loads_to_the_same_answers(tmp_path: Path) -> None:
    inside, outside = clusters(1)
    scope = fit(inside[:20], outside[:60])
    scope.save(tmp_path)
    loaded = load_scope(tmp_path)
    assert loaded is not None
    everyone = torch.cat([inside, outside])
    assert loaded.inside(everyone) == scope.inside(everyone)
    assert load_scope(tmp_path / "elsewhere") is None  # no file: the adapter answers all


def test_small_talk_a_job_trains_is_not_fitted_outside() -> None:
    outside = outside_of(["Hello", "What is the Wi-Fi password?"])
    assert "thanks" in outside and "What is a noun? Give an example." in outside
    assert not {"hello", "Hello!"} & set(outside)  # case and end marks aside
    assert set(SMALL_TALK) <= set(outside_of([]))


# Not in SMALL_TALK: what the scope was fitted on says nothing of what it does with these.
GREETINGS_NOT_FITTED = [
    "hi there", "Hello?", "hey", "Good evening!", "thx", "Thanks a lot", "great, thanks",
    "ok thanks", "cool", "good night", "see you", "goodbye!", "Nice", "What's up?", "test",
]  # fmt: skip


def test_on_the_real_model_small_talk_stays_outside_a_faqs_scope(
    real_model: str, model_cache: Path
) -> None:
    """Fitted on sentences alone, the scope of the cafe FAQ put 11 of these 15 short
    messages inside on SmolLM2-135M-Instruct, and "hi" was answered with a FAQ answer."""
    from app.ml.models import load_causal_lm, load_tokenizer, resolve_model_dir

    directory = resolve_model_dir(real_model, cache_dir=model_cache, offline=True)
    tokenizer = load_tokenizer(directory)
    model = load_causal_lm(directory, dtype=torch.bfloat16, device="cpu")
    lines = (Path(__file__).parents[1] / "data" / "cafe_faq.jsonl").read_text().splitlines()
    questions = [json.loads(line)["question"] for line in lines]
    scope = fit_scope(model, tokenizer, questions, device="cpu", seed=0)

    def inside(texts: list[str]) -> list[bool]:
        ids = [question_ids(tokenizer, text) for text in texts]
        return scope.inside(features(model, ids, "cpu"))

    assert all(inside(questions))
    said = zip(GREETINGS_NOT_FITTED, inside(GREETINGS_NOT_FITTED), strict=True)
    taken = [text for text, yes in said if yes]
    print(f"\n{len(taken)} of {len(GREETINGS_NOT_FITTED)} short messages inside: {taken}")
    assert len(taken) <= 3


def test_a_word_dropped_copy_keeps_some_words_in_order() -> None:
    rng = random.Random(0)
    question = "What time does the kitchen close on a Sunday evening?"
    copies = {with_words_dropped(question, rng) for _ in range(20)}
    assert len(copies) > 5
    words = question.split()
    for copy in copies:
        kept = copy.split()
        assert kept and all(word in words for word in kept)
        assert kept == [w for w in words if w in kept]
    assert with_words_dropped("Why?", rng, share=1.0) == "Why?"  # never an empty question


def asked(engine: Engine, question: str, adapter: AdapterRef | None, scoped: bool) -> str:
    """One user question, its scope read only if `scoped`."""
    return answered(
        engine, [{"role": "user", "content": question}], adapter, question if scoped else None
    )


def scoped_copy(engine: Engine, adapter: AdapterRef, tmp_path: Path, bias: float) -> AdapterRef:
    """`adapter` with a scope that takes every question (bias > 0) or none (bias < 0)."""
    scoped = tmp_path / "scoped"
    shutil.copytree(adapter.directory, scoped)
    size = engine.call(lambda: int(engine.model.config.hidden_size))
    Scope(torch.zeros(size), torch.ones(size), torch.zeros(size), bias).save(scoped)
    assert (scoped / SCOPE_FILE).is_file()
    return AdapterRef("scoped", scoped)


@pytest.mark.parametrize("bias", [-1.0, 1.0], ids=["outside", "inside"])
def test_the_engine_gives_a_question_outside_the_scope_to_the_base(
    model_dir: Path, adapters: list[AdapterRef], tmp_path: Path, bias: float
) -> None:
    engine = make_engine(model_dir, max_batch=8)
    try:
        adapter = scoped_copy(engine, adapters[0], tmp_path, bias)
        question = "hi"
        base = asked(engine, question, None, scoped=False)
        alone = asked(engine, question, adapters[0], scoped=False)
        assert base != alone  # the adapter really answers otherwise
        served = asked(engine, question, adapter, scoped=True)
        assert served == (base if bias < 0 else alone)
        # Without the question (a completion), the adapter answers whatever its scope says.
        assert asked(engine, question, adapter, scoped=False) == alone
    finally:
        engine.close()


def answered(
    engine: Engine,
    messages: list[dict[str, str]],
    adapter: AdapterRef | None,
    question: str | None = None,
    base_messages: list[dict[str, str]] | None = None,
) -> str:
    collected = Collected()
    tokenizer = engine.tokenizer
    engine.submit(
        GenerationRequest(
            prompt_ids(tokenizer, messages),
            adapter,
            Sampling(max_tokens=24),
            collected,
            time.monotonic() + 60,
            question_ids=question_ids(tokenizer, question) if question else None,
            base_prompt_ids=prompt_ids(tokenizer, base_messages) if base_messages else None,
        )
    )
    collected.wait()
    return collected.text


@pytest.mark.parametrize("bias", [-1.0, 1.0], ids=["outside", "inside"])
def test_the_base_is_asked_without_the_system_prompt_the_adapter_was_trained_with(
    model_dir: Path, adapters: list[AdapterRef], tmp_path: Path, bias: float
) -> None:
    """An adapter trained under a system prompt is served with it where a chat brings none;
    that prompt is the adapter's: a question its scope gives the base was asked under it,
    and a small base answered its general questions as the persona, not as it knew them."""
    engine = make_engine(model_dir, max_batch=8)
    try:
        adapter = scoped_copy(engine, adapters[0], tmp_path, bias)
        as_sent = [{"role": "user", "content": "hi"}]
        as_trained = [{"role": "system", "content": "You answer for the bakery."}, *as_sent]
        base_as_sent = answered(engine, as_sent, None)
        assert base_as_sent != answered(engine, as_trained, None)  # the prompt tells
        served = answered(engine, as_trained, adapter, "hi", base_messages=as_sent)
        alone = answered(engine, as_trained, adapters[0])
        assert served == (base_as_sent if bias < 0 else alone)
    finally:
        engine.close()
