"""A streamed generation: the engine's events reach the event loop in order, as many at a
time as have come, with one wake-up for each; and the chunks a batch becomes."""

import asyncio
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from app.api.openai.completions import Shape, _chunks
from app.ml.builtin import BUILTIN_TINY, ensure_builtin_model
from app.ml.chat_template import CallWriting
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.serving.asking import AskFailed, Choice, Generation, Row, ask, chat_ids
from app.ml.serving.engine import Engine
from app.ml.serving.requests import (
    EngineEvent,
    EngineLimits,
    Finished,
    FinishReason,
    GenerationRequest,
    Sampling,
    TextDelta,
)
from app.services.serving.tool_use import ToolUse


def started(generation: Generation, choices: int = 1) -> list[Any]:
    sinks = []
    for index in range(choices):
        sink = generation.sink(index)
        request = GenerationRequest([1, 2, 3], None, Sampling(), sink, time.monotonic() + 60)
        generation.add(request)
        sinks.append(sink)
    return sinks


async def never_gone() -> bool:
    return False


def counting_wake_ups(loop: asyncio.AbstractEventLoop) -> list[int]:
    """Counts the calls the engine's thread makes into the loop."""
    calls = [0]
    original = loop.call_soon_threadsafe

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign, assignment]
    return calls


def test_what_came_before_the_loop_looked_is_one_batch_and_one_wake_up() -> None:
    async def run() -> tuple[list[list[tuple[Choice, EngineEvent]]], int]:
        loop = asyncio.get_running_loop()
        wake_ups = counting_wake_ups(loop)
        generation = Generation(n=1, loop=loop)
        (sink,) = started(generation)
        events = [TextDelta(t) for t in ["Par", "is", " is", " the"]]
        # the engine's thread says all of it while the loop is busy elsewhere
        engine = threading.Thread(
            target=lambda: [sink(e) for e in [*events, Finished(FinishReason.STOP, 3, 4)]]
        )
        engine.start()
        engine.join()
        batches = [batch async for batch in generation.batches(never_gone)]
        return batches, wake_ups[0]

    batches, wake_ups = asyncio.run(run())
    assert wake_ups == 1
    assert len(batches) == 1
    (batch,) = batches
    assert [e.text for _, e in batch if isinstance(e, TextDelta)] == ["Par", "is", " is", " the"]
    choice, last = batch[-1]
    assert isinstance(last, Finished) and choice.answer == "Paris is the"


def test_events_that_come_while_the_loop_waits_wake_it_each_time_in_order() -> None:
    async def run() -> list[list[str]]:
        loop = asyncio.get_running_loop()
        generation = Generation(n=1, loop=loop)
        (sink,) = started(generation)

        def engine() -> None:
            for word in ["one", "two", "three"]:
                time.sleep(0.05)  # a decode step
                sink(TextDelta(word))
            sink(Finished(FinishReason.LENGTH, 3, 3))

        threading.Thread(target=engine).start()
        return [
            [e.text if isinstance(e, TextDelta) else e.reason.value for _, e in batch]
            async for batch in generation.batches(never_gone)
        ]

    batches = asyncio.run(run())
    assert [word for batch in batches for word in batch] == ["one", "two", "three", "length"]
    assert len(batches) >= 3  # a step apart: each came on its own


def test_a_caller_that_stops_reading_cancels_its_requests() -> None:
    async def run() -> Generation:
        generation = Generation(n=2, loop=asyncio.get_running_loop())
        first, _ = started(generation, choices=2)
        first(TextDelta("a"))
        batches = generation.batches(never_gone)
        await anext(batches)
        await batches.aclose()
        return generation

    generation = asyncio.run(run())
    assert all(choice.request.cancelled for choice in generation.choices)


def test_a_caller_gone_while_tokens_keep_coming_is_seen_and_cancelled() -> None:
    """A whole answer (not streamed) sends nothing until it ends, so nothing fails when its
    client leaves: the caller is looked at while tokens flow, not only when they pause
    (before, an abandoned 2,000-token answer ran to its end, and a client's retry after
    its timeout ran beside it)."""

    async def run() -> tuple[Generation, int]:
        generation = Generation(n=1, loop=asyncio.get_running_loop())
        (sink,) = started(generation)
        stop = threading.Event()

        def engine() -> None:  # a token every 10 ms, without end
            while not stop.is_set() and not generation.choices[0].request.cancelled:
                sink(TextDelta("a"))
                time.sleep(0.01)

        gone_at = time.monotonic() + 0.3
        looks = 0

        async def disconnected() -> bool:
            nonlocal looks
            looks += 1
            return time.monotonic() > gone_at

        thread = threading.Thread(target=engine)
        thread.start()
        try:
            async with asyncio.timeout(10):
                async for _ in generation.batches(disconnected):
                    pass
        finally:
            stop.set()
            thread.join()
        return generation, looks

    generation, looks = asyncio.run(run())
    assert generation.choices[0].request.cancelled
    assert looks <= 3  # about once a second, not once a batch


def contents(chunks: list[str]) -> list[tuple[int, str | None, str | None]]:
    """(choice, content, finish reason) of each chat chunk."""
    seen = []
    for chunk in chunks:
        assert chunk.startswith("data: ") and chunk.endswith("\n\n")
        (choice,) = json.loads(chunk[6:])["choices"]
        seen.append((choice["index"], choice["delta"]["content"], choice["finish_reason"]))
    return seen


def batch_of(*said: tuple[int, EngineEvent]) -> list[tuple[Choice, EngineEvent]]:
    choices = [Choice(i, GenerationRequest([], None, Sampling(), print, 0.0)) for i in range(2)]
    for index, event in said:
        if isinstance(event, TextDelta):
            choices[index].text.append(event.text)
    return [(choices[index], event) for index, event in said]


SHAPE = Shape("chatcmpl-x", "m", chat=True)


def test_a_choices_texts_in_a_row_become_one_chunk_in_the_order_said() -> None:
    stop = Finished(FinishReason.STOP, 3, 4)
    batch = batch_of(
        (0, TextDelta("Par")),
        (0, TextDelta("is")),
        (1, TextDelta("Lyon")),
        (0, TextDelta(".")),
        (0, stop),
        (1, TextDelta("!")),
    )
    chunks, failed = _chunks(batch, SHAPE)
    assert not failed
    assert contents(chunks) == [
        (0, "Paris", None),
        (1, "Lyon", None),
        (0, ".", None),
        (0, None, "stop"),
        (1, "!", None),
    ]


def test_an_error_is_the_last_chunk() -> None:
    failed_event = Finished(FinishReason.ERROR, 3, 1, "out of memory")
    batch = batch_of((0, TextDelta("a")), (0, failed_event), (1, TextDelta("b")))
    chunks, failed = _chunks(batch, SHAPE)
    assert failed
    assert contents(chunks[:1]) == [(0, "a", None)]
    assert json.loads(chunks[1][6:])["error"]["type"] == "server_error"
    assert len(chunks) == 2


def test_an_answer_that_may_call_tools_is_sent_whole_when_it_ends() -> None:
    tools = ToolUse(frozenset({"weather"}), CallWriting("<tool_call>", "</tool_call>"))
    shape = Shape("chatcmpl-x", "m", chat=True, tool_use=tools)
    batch = batch_of((0, TextDelta("Sun")), (0, TextDelta("ny")))
    assert _chunks(batch, shape) == ([], False)
    batch = batch_of((0, TextDelta("Sunny")), (0, Finished(FinishReason.STOP, 3, 2)))
    chunks, _ = _chunks(batch, shape)
    assert contents(chunks) == [(0, "Sunny", "stop")]


def test_a_stream_sends_at_most_every_interval_but_its_first_and_its_end_at_once() -> None:
    every = 0.3

    async def run() -> tuple[list[tuple[float, list[str]]], float, float]:
        generation = Generation(n=1, loop=asyncio.get_running_loop(), send_every=every)
        (sink,) = started(generation)
        said_at: dict[str, float] = {}

        def engine() -> None:
            for i in range(10):
                said_at.setdefault("first", time.monotonic())
                sink(TextDelta(str(i)))
                time.sleep(0.04)  # a decode step
            said_at["end"] = time.monotonic()
            sink(Finished(FinishReason.STOP, 3, 10))

        threading.Thread(target=engine).start()
        batches = [
            (time.monotonic(), [e.text if isinstance(e, TextDelta) else "end" for _, e in batch])
            async for batch in generation.batches(never_gone)
        ]
        return batches, said_at["first"], said_at["end"]

    batches, first_said, end_said = asyncio.run(run())
    assert [t for _, batch in batches for t in batch] == [*map(str, range(10)), "end"]
    assert batches[0][0] - first_said < 0.1  # the first token is not held
    assert batches[-1][1][-1] == "end" and batches[-1][0] - end_said < 0.1  # nor the end
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(batches[:-1])]
    assert all(gap >= every - 0.01 for gap in gaps), gaps
    assert len(batches) <= 3  # 10 tokens 0.04 s apart: the first, one held, the end


def test_a_waiter_gives_up_once_the_engine_makes_no_progress(tmp_path: Path) -> None:
    """A real engine whose steps stop after a few tokens (a stuck device, a deadlock): the
    caller hears AskFailed within the stall bound, not at the deadline an hour away."""
    model_dir = ensure_builtin_model(tmp_path / "models")
    steps, release = [0], threading.Event()

    def step() -> None:
        steps[0] += 1
        if steps[0] > 3:
            release.wait(30)

    def load() -> tuple[Any, Any]:
        model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
        return model, load_tokenizer(model_dir)

    engine = Engine(
        base_model=BUILTIN_TINY,
        load=load,
        device="cpu",
        precision="fp32",
        limits=EngineLimits(),
        between_steps=step,
    )
    try:
        prompt = chat_ids(engine.tokenizer, [{"role": "user", "content": "hello"}])
        row = Row(prompt, None, Sampling(max_tokens=200, ignore_eos=True))
        started = time.monotonic()
        generation = ask(engine, [row], seconds=3600, stall_seconds=1.0)
        with pytest.raises(AskFailed, match="no progress for 1 s"):
            generation.answer()
        assert time.monotonic() - started < 10
        assert generation.choices[0].request.cancelled
    finally:
        release.set()
        engine.close()
