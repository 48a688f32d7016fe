"""The engine against one-at-a-time `generate`: batched rows, mixed adapters, endings."""

import functools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoConfig

from app.ml.builtin import BUILTIN_TINY, ensure_builtin_model
from app.ml.data import prompt_ids
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.serving.engine import Engine
from app.ml.serving.kv_budget import KvBudget
from app.ml.serving.requests import (
    AdapterRef,
    EngineEvent,
    EngineLimits,
    Finished,
    FinishReason,
    GenerationRequest,
    QueueFull,
    Sampling,
    TextDelta,
)
from bench.adapters import random_adapter
from bench.reference_answers import generate_answers

QUESTIONS = ["What is qatune?", "hi", "A much longer question, about many things at once?", "x"]


@dataclass
class Collected:
    deltas: list[str] = field(default_factory=list)
    finished: Finished | None = None
    finished_at: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    def __call__(self, event: EngineEvent) -> None:
        if isinstance(event, TextDelta):
            self.deltas.append(event.text)
        else:
            self.finished, self.finished_at = event, time.monotonic()
            self.done.set()

    @property
    def text(self) -> str:
        return "".join(self.deltas)

    def wait(self) -> Finished:
        assert self.done.wait(60), "the engine never finished the request"
        assert self.finished is not None
        return self.finished


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_builtin_model(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def adapters(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[AdapterRef]:
    root = tmp_path_factory.mktemp("adapters")
    return [
        AdapterRef(
            f"a{i}", random_adapter(model_dir, root / f"a{i}", base_model=BUILTIN_TINY, seed=i)
        )
        for i in range(3)
    ]


def make_engine(model_dir: Path, **limits: Any) -> Engine:
    # fp32: batched and one-at-a-time decoding agree exactly; in bf16 a random model's
    # near-tied logits flip with the matmul shapes.
    def load() -> tuple[Any, Any]:
        model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
        return model, load_tokenizer(model_dir)

    return Engine(
        base_model=BUILTIN_TINY,
        load=load,
        device="cpu",
        precision="fp32",
        limits=EngineLimits(**limits),
    )


@pytest.fixture
def engine(model_dir: Path) -> Iterator[Engine]:
    engine = make_engine(model_dir, max_batch=8)
    yield engine
    engine.close()


def ask(
    engine: Engine,
    question: str,
    adapter: AdapterRef | None = None,
    caller: int | None = None,
    **sampling: Any,
) -> Collected:
    collected = Collected()
    ids = prompt_ids(engine.tokenizer, [{"role": "user", "content": question}])
    sampling.setdefault("max_tokens", 24)
    request = GenerationRequest(
        ids, adapter, Sampling(**sampling), collected, time.monotonic() + 60, caller=caller
    )
    engine.submit(request)
    return collected


def one_at_a_time(model_dir: Path, question: str, adapter: AdapterRef | None) -> str:
    model = alone(model_dir, adapter)
    messages = [{"role": "user", "content": question}]
    tokenizer = load_tokenizer(model_dir)
    (answer,) = generate_answers(model, tokenizer, [messages], device="cpu", max_new_tokens=24)
    return answer


@functools.cache
def alone(model_dir: Path, adapter: AdapterRef | None) -> Any:
    """The base, or the base with one adapter, loaded the plain way (once per module run)."""
    from peft import PeftModel

    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
    if adapter is not None:
        model = PeftModel.from_pretrained(model, adapter.directory).eval()
    return model


def test_rows_of_different_lengths_and_adapters_answer_as_if_alone(
    engine: Engine, model_dir: Path, adapters: list[AdapterRef]
) -> None:
    cases = [(q, a) for q in QUESTIONS[:2] for a in [None, *adapters]]
    running = [ask(engine, q, a) for q, a in cases]
    for (question, adapter), collected in zip(cases, running, strict=True):
        assert collected.wait().reason in (FinishReason.STOP, FinishReason.LENGTH)
        assert collected.text == one_at_a_time(model_dir, question, adapter), (question, adapter)
    answers = {
        a.key if a else None: c.text for (q, a), c in zip(cases, running, strict=True) if q == "hi"
    }
    assert len(set(answers.values())) == 4  # each adapter really answers differently
    assert engine.stats().running == 0 and set(engine.stats().adapters) == {"a0", "a1", "a2"}


def test_length_stop_sequences_and_streamed_pieces(engine: Engine) -> None:
    whole = ask(engine, "hi", max_tokens=20, ignore_eos=True)
    assert whole.wait() == Finished(FinishReason.LENGTH, whole.finished.prompt_tokens, 20)  # type: ignore[union-attr]
    stop = whole.text[5:8]
    stopped = ask(engine, "hi", max_tokens=20, ignore_eos=True, stop=(stop,))
    assert stopped.wait().reason == FinishReason.STOP
    assert stopped.text == whole.text[: whole.text.find(stop)]  # nothing of the stop shown


def test_a_seed_makes_sampling_repeatable(engine: Engine) -> None:
    options: dict[str, Any] = {
        "temperature": 1.0,
        "top_p": 0.9,
        "max_tokens": 30,
        "ignore_eos": True,
    }
    first = ask(engine, "hi", None, seed=3, **options)
    second = ask(engine, "hi", None, seed=3, **options)
    other = ask(engine, "hi", None, seed=4, **options)
    for collected in (first, second, other):
        collected.wait()
    assert first.text == second.text != other.text


def test_a_cancelled_request_leaves_and_the_others_go_on(engine: Engine) -> None:
    long = ask(engine, "hi", max_tokens=2000, ignore_eos=True)
    short = ask(engine, "x", max_tokens=30, ignore_eos=True)
    while not long.deltas:
        time.sleep(0.01)
    started = time.monotonic()
    engine._batch.rows[0].request.cancel()  # what a disconnected client's handler does
    assert long.wait().reason == FinishReason.CANCELLED
    assert time.monotonic() - started < 1.0
    assert short.wait().reason == FinishReason.LENGTH and len(short.text) > 0


def test_requests_wait_for_room_in_the_kv_cache_budget(model_dir: Path) -> None:
    config = AutoConfig.from_pretrained(model_dir)
    per_token = KvBudget.for_model(config, torch.float32, EngineLimits()).bytes_per_token
    ids = prompt_ids(load_tokenizer(model_dir), [{"role": "user", "content": "hi"}])
    row_bytes = (len(ids) + 30) * per_token  # prompt and max_tokens
    engine = make_engine(model_dir, max_batch=8, kv_cache_bytes=2 * row_bytes)
    try:
        running = [ask(engine, "hi", max_tokens=30, ignore_eos=True) for _ in range(6)]
        most = 0
        while not all(collected.done.is_set() for collected in running):
            most = max(most, engine.stats().running)
            time.sleep(0.001)
        assert most == 2  # two rows fit the budget; the others waited their turn
        assert all(collected.wait().reason == FinishReason.LENGTH for collected in running)
    finally:
        engine.close()


def test_a_full_queue_is_refused_at_once(model_dir: Path) -> None:
    engine = make_engine(model_dir, max_batch=1, max_waiting=1)
    try:
        first = ask(engine, "hi", max_tokens=500, ignore_eos=True)
        while engine.stats().running == 0:
            time.sleep(0.01)
        ask(engine, "hi", max_tokens=5)  # waits
        with pytest.raises(QueueFull) as full:
            ask(engine, "hi", max_tokens=5)
        assert full.value.retry_after >= 1
        first.wait()
    finally:
        engine.close()


def test_a_burst_on_an_idle_engine_is_queued_not_refused(model_dir: Path) -> None:
    """Requests that arrive together, before the engine's next step: the batch's free rows
    take 8 and 8 may wait; before, all of them counted as waiting and half were refused."""
    engine = make_engine(model_dir, max_batch=8, max_waiting=8)
    try:
        with engine._wake:  # held: the engine's thread cannot admit any in between
            burst = [ask(engine, f"question {i}", max_tokens=4) for i in range(16)]
            with pytest.raises(QueueFull, match="8 of your requests are already waiting"):
                ask(engine, "one more", max_tokens=4)
        assert all(c.wait().reason in (FinishReason.STOP, FinishReason.LENGTH) for c in burst)
    finally:
        engine.close()


def test_one_callers_burst_does_not_hold_anothers_request_back(model_dir: Path) -> None:
    """A turn per caller: with one row decoding and caller 1's four more waiting, caller 2's
    request is the next to join; and a caller's cap counts its own requests, so the burst
    that fills caller 1's does not refuse caller 2's."""
    engine = make_engine(model_dir, max_batch=1, max_waiting=4)
    long: dict[str, Any] = {"max_tokens": 12, "ignore_eos": True}
    try:
        with engine._wake:  # held: nothing joins until all are in
            burst = [ask(engine, f"question {i}", caller=1, **long) for i in range(5)]
            with pytest.raises(QueueFull, match="4 of your requests"):
                ask(engine, "one more", caller=1, **long)
            other = ask(engine, "mine", caller=2, **long)
        other.wait()
        for collected in burst:
            collected.wait()
        order = sorted([*burst, other], key=lambda collected: collected.finished_at)
        assert order == [burst[0], other, *burst[1:]]
    finally:
        engine.close()


def test_bad_adapters_fail_their_request_only(
    engine: Engine, tmp_path: Path, adapters: list[AdapterRef]
) -> None:
    missing = ask(engine, "hi", AdapterRef("gone", tmp_path / "nothing"))
    assert missing.wait().reason == FinishReason.ERROR
    assert "incomplete" in (missing.finished.error or "")  # type: ignore[union-attr]
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for path in adapters[0].directory.iterdir():
        (corrupt / path.name).write_bytes(path.read_bytes())
    (corrupt / "adapter_model.safetensors").write_bytes(b"not safetensors")
    broken = ask(engine, "hi", AdapterRef("corrupt", corrupt))
    assert broken.wait().reason == FinishReason.ERROR
    assert "could not be loaded" in (broken.finished.error or "")  # type: ignore[union-attr]
    assert ask(engine, "hi").wait().reason in (FinishReason.STOP, FinishReason.LENGTH)


def test_adapters_are_bounded_and_forgotten(model_dir: Path, adapters: list[AdapterRef]) -> None:
    engine = make_engine(model_dir, max_adapters=2)
    try:
        for adapter in adapters:
            ask(engine, "hi", adapter).wait()
        assert engine.stats().adapters == ["a1", "a2"]  # least recently used went first
        engine.forget_adapters("a2")
        assert engine.stats().adapters == ["a1"]
        assert ask(engine, "hi", adapters[2]).wait().reason != FinishReason.ERROR  # reloads
    finally:
        engine.close()


def test_a_cold_adapter_read_slowly_blocks_no_warm_request(
    model_dir: Path, adapters: list[AdapterRef]
) -> None:
    """An adapter's files are read on a thread of their own: while one reads slowly (a
    disk busy elsewhere, here the reader held), the engine answers the warm adapter and
    the base, and the cold one's request answers once its read ends."""
    engine = make_engine(model_dir)
    try:
        assert ask(engine, "hi", adapters[0]).wait().reason != FinishReason.ERROR  # warm
        disk = threading.Event()
        engine.adapters._reader.submit(disk.wait, 60)  # the read queued behind this one
        cold = ask(engine, "hi", adapters[1])
        warm, base = ask(engine, "hi", adapters[0]), ask(engine, "hi")
        assert warm.wait().reason != FinishReason.ERROR
        assert base.wait().reason != FinishReason.ERROR
        assert not cold.done.is_set() and engine.stats().waiting == 1
        disk.set()
        assert cold.wait().reason != FinishReason.ERROR
        assert engine.stats().adapters == ["a0", "a1"]
    finally:
        engine.close()


def test_one_adapter_alone_runs_merged_and_unmerging_restores_the_base_exactly(
    model_dir: Path, adapters: list[AdapterRef]
) -> None:
    model = load_causal_lm(model_dir, dtype=torch.bfloat16, device="cpu").eval()
    pristine = {name: p.detach().clone() for name, p in model.named_parameters()}
    engine = Engine(
        base_model=BUILTIN_TINY,
        load=lambda: (model, load_tokenizer(model_dir)),
        device="cpu",
        precision="bf16",
        limits=EngineLimits(),
    )
    try:
        for adapter in [adapters[0], adapters[1], None, adapters[0]]:
            ask(engine, "hi", adapter).wait()
            bank = engine.adapters.bank
            merged = bank.merged if bank else None
            assert merged == (adapter.key if adapter else None)
        ask(engine, "hi").wait()  # the bare model: every adapter unmerged
        for name, weight in engine.model.named_parameters():
            assert torch.equal(weight, pristine[name]), name
    finally:
        engine.close()


def test_forgetting_the_only_adapter_leaves_its_base_serving(
    model_dir: Path, adapters: list[AdapterRef]
) -> None:
    """A deleted model was the only adapter on its base: the base and other adapters
    still answer (every later request on the base used to hang)."""
    engine = make_engine(model_dir)
    try:
        alone = ask(engine, "hi").wait()
        assert ask(engine, "hi", adapters[0]).wait().reason != FinishReason.ERROR
        engine.forget_adapters(adapters[0].key)
        assert engine.stats().adapters == []
        base = ask(engine, "hi")
        assert base.wait() == alone
        assert ask(engine, "hi", adapters[1]).wait().reason != FinishReason.ERROR
        assert ask(engine, "hi").wait() == alone  # unmerged exactly, twice over
    finally:
        engine.close()


STAGES = {
    # stage: the method that raises once (of the engine, or of its adapter cache)
    "loading an adapter": "adapters.ensure",
    "prefilling a prompt": "_prefill",
    "choosing forward options": "adapters.forward_options",
    "a decode step": "_step",
    "taking a token": "_accept",
    "sending text": "_send",
    "expiring waiters": "_expire_waiting",
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_raise_in_any_stage_ends_requests_and_the_engine_goes_on(
    model_dir: Path, adapters: list[AdapterRef], stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(model_dir, max_batch=2)
    try:
        *path, name = STAGES[stage].split(".")
        owner = engine.adapters if path else engine
        real = getattr(owner, name)
        raised = threading.Event()

        def once(*args: Any, **kwargs: Any) -> Any:
            if not raised.is_set():
                raised.set()
                raise RuntimeError(f"injected in {stage}")
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, once)
        running = [ask(engine, q, a) for q in QUESTIONS for a in (None, adapters[0])]
        for collected in running:  # each one ends, with an answer or an error: none hangs
            assert collected.done.wait(30), stage
        assert raised.is_set()
        errors = [c.finished for c in running if c.finished.reason == FinishReason.ERROR]  # type: ignore[union-attr]
        assert all(f"injected in {stage}" in (f.error or "") for f in errors)  # type: ignore[union-attr]
        assert not engine.closed and engine.stats().waiting == engine.stats().running == 0
        assert ask(engine, "hi").wait().reason != FinishReason.ERROR
        assert ask(engine, "hi", adapters[1]).wait().reason != FinishReason.ERROR
    finally:
        engine.close()


def test_a_caller_whose_callback_raises_is_cancelled_alone(engine: Engine) -> None:
    def gone(event: EngineEvent) -> None:
        raise ConnectionError("the client's queue is closed")

    ids = prompt_ids(engine.tokenizer, [{"role": "user", "content": "hi"}])
    request = GenerationRequest(
        ids, None, Sampling(max_tokens=50, ignore_eos=True), gone, time.monotonic() + 60
    )
    engine.submit(request)
    other = ask(engine, "x", max_tokens=30, ignore_eos=True)
    assert other.wait().reason == FinishReason.LENGTH
    assert request.cancelled and request.ended


def test_a_request_that_waits_past_its_deadline_ends(model_dir: Path) -> None:
    engine = make_engine(model_dir, max_batch=1)
    try:
        first = ask(engine, "hi", max_tokens=400, ignore_eos=True)
        late = Collected()
        ids = prompt_ids(engine.tokenizer, [{"role": "user", "content": "x"}])
        engine.submit(GenerationRequest(ids, None, Sampling(), late, time.monotonic() + 0.3))
        ended = late.wait()
        assert ended.reason == FinishReason.ERROR and "time limit" in (ended.error or "")
        assert not first.done.is_set()  # it was still decoding: the waiter did not wait for it
        first.wait()
    finally:
        engine.close()
