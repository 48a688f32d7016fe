"""The official `openai` client asks tuned models through /v1 on a live server."""

import json
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.conftest import (
    Server,
    login_over_http,
    make_user_over_http,
    qa_pairs,
    together,
    unique,
)
from tests.e2e.test_openai_client import users_client, wait_for

pytestmark = pytest.mark.slow
QUESTIONS = 8  # asked of each model


def jsonl(pairs: list[dict[str, str]]) -> bytes:
    return "".join(json.dumps(p) + "\n" for p in pairs).encode()


def train(client: OpenAI, pairs: list[dict[str, str]], suffix: str) -> Any:
    file = client.files.create(file=(f"{suffix}.jsonl", jsonl(pairs)), purpose="fine-tune")
    return client.fine_tuning.jobs.create(
        model="builtin:tiny", training_file=file.id, suffix=suffix
    )


def chat(client: OpenAI, model: str, question: str, **options: Any) -> Any:
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": question}],
        temperature=0,
        **options,
    )


def ask_pair(client: OpenAI, model: str, pair: dict[str, str]) -> Any:
    return chat(client, model, pair["question"])


def streamed(client: OpenAI, model: str, question: str) -> tuple[str, list[Any]]:
    chunks = list(
        chat(client, model, question, stream=True, stream_options={"include_usage": True})
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


def test_tuned_models_answer_through_chat_completions(shared_server: Server) -> None:
    server = shared_server
    alice, bob_name = unique("alice"), unique("bob")
    client, bob = users_client(server, alice), users_client(server, bob_name)
    plain = qa_pairs()[:12]  # (each model learns them all before it is asked 8)
    shouted = [{**p, "answer": p["answer"].upper()} for p in plain]
    jobs = [train(client, plain, "plain"), train(client, shouted, "shouted")]
    models = []
    for job in jobs:
        done = wait_for(client, job.id, {"succeeded", "failed", "cancelled"})
        assert done.status == "succeeded", done.error
        models.append(done.fine_tuned_model)
    expected = {models[0]: plain[:QUESTIONS], models[1]: shouted[:QUESTIONS]}

    # Whole answers, greedy: each model answers its own training questions.
    for model, pairs in expected.items():
        asked = together(partial(ask_pair, client, model), pairs)
        right = sum(
            a.choices[0].message.content == p["answer"] for a, p in zip(asked, pairs, strict=True)
        )
        assert right >= QUESTIONS - 1, f"{model}: {right}/{QUESTIONS}"
    answer = chat(client, models[0], plain[0]["question"])
    assert answer.object == "chat.completion" and answer.choices[0].finish_reason == "stop"
    assert answer.usage.completion_tokens > 0 and answer.usage.prompt_tokens > 0
    assert answer.model == models[0] and answer.id.startswith("chatcmpl-")

    # Streaming: a role delta, content deltas, the finish reason, the usage, [DONE].
    text, chunks = streamed(client, models[0], plain[0]["question"])
    assert text == answer.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == answer.usage.total_tokens
    # In pieces, not one blob; how many depends on the machine's speed, since a stream sends
    # at most one chunk every serve_stream_interval_ms (a busy CI machine gave 3)
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1

    # 8 concurrent streams over two adapters: each gets its own adapter's answer.
    results: dict[int, str] = {}
    cases = [(models[i % 2], expected[models[i % 2]][i]["question"]) for i in range(8)]

    def ask(i: int) -> None:
        results[i] = streamed(client, *cases[i])[0]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    wrong = [
        (cases[i], results.get(i))
        for i in range(8)
        if results.get(i) != expected[cases[i][0]][i]["answer"]
    ]
    assert len(wrong) <= 1, wrong  # greedy, trained: at most one slip, never the other's
    other_answers = {expected[m][i]["answer"] for m in models for i in range(8)}
    for i in range(8):
        mine = expected[cases[i][0]][i]["answer"]
        assert results.get(i) == mine or results.get(i) not in other_answers

    # Text completions, a checkpoint as a model, and the native route on the same engine.
    completion = client.completions.create(model=models[0], prompt="qatune", max_tokens=5)
    assert completion.choices[0].finish_reason in ("stop", "length")
    assert completion.usage is not None and completion.usage.completion_tokens <= 5
    checkpoint = next(iter(client.fine_tuning.jobs.checkpoints.list(jobs[0].id)))
    assert chat(client, checkpoint.fine_tuned_model_checkpoint, "hi").choices[0].message

    # Another user's model is not found; so is a made-up one.
    with pytest.raises(openai.NotFoundError):
        chat(bob, models[0], "hi")
    with pytest.raises(openai.NotFoundError):
        chat(client, models[0].replace(f":{alice}:", f":{bob_name}:"), "hi")
    with pytest.raises(openai.BadRequestError):
        chat(client, models[0], "hi", max_tokens=10**6)

    # Deleting a model ends its serving: it is not found from then on.
    client.models.delete(models[1])
    with pytest.raises(openai.NotFoundError):
        chat(client, models[1], "hi")


def long_stream(server: Server, headers: dict[str, str], tokens: int = 1500) -> httpx.Response:
    request = httpx.Request(
        "POST",
        f"{server.url}/v1/chat/completions",
        json={
            "model": "builtin:tiny",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": tokens,
            "ignore_eos": True,
            "stream": True,
        },
        headers=headers,
    )
    return httpx.Client(timeout=60).send(request, stream=True)


def serving(server: Server, admin: dict[str, str]) -> dict[str, Any]:
    engines = httpx.get(f"{server.url}/system/serving", headers=admin).json()
    return engines[0] if engines else {"running": 0, "waiting": 0}


def wait_until(check: Callable[[], bool], timeout: float) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, "timed out"
        time.sleep(0.02)
    return time.monotonic() - started


def test_a_disconnect_frees_its_slot_and_a_full_queue_is_a_429(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(QATUNE_SERVE_MAX_BATCH="1", QATUNE_SERVE_MAX_WAITING="1")
    admin = login_over_http(server)
    first = long_stream(server, admin)
    lines = first.iter_lines()
    assert next(lines).startswith("data: ")  # the role delta: it is running
    wait_until(lambda: serving(server, admin)["running"] == 1, 10)
    second = long_stream(server, admin)  # waits for the one slot

    client = OpenAI(base_url=f"{server.url}/v1", api_key=admin["Authorization"][7:], max_retries=0)
    with pytest.raises(openai.RateLimitError) as full:
        chat(client, "builtin:tiny", "hi", max_tokens=5)
    assert int(full.value.response.headers["Retry-After"]) >= 1

    first.close()  # the client goes away mid-stream
    freed = wait_until(lambda: serving(server, admin)["waiting"] == 0, 5)
    print(f"\nslot freed {freed * 1000:.0f} ms after the disconnect")
    second.close()
    wait_until(lambda: serving(server, admin)["running"] == 0, 5)
    assert chat(client, "builtin:tiny", "hi", max_tokens=5).choices[0].finish_reason


def test_one_users_burst_does_not_hold_anothers_chat_back(
    make_server: Callable[..., Server],
) -> None:
    """Alice's script sends four long streams at once to a server that decodes one row at a
    time; Bob's short chat, sent after them, joins at the next free row, before the ones of
    hers still waiting: a turn per user. Before, it waited for all four."""
    server = make_server(QATUNE_SERVE_MAX_BATCH="1")
    admin = login_over_http(server)
    alice = make_user_over_http(server, admin, "alice")
    bob = make_user_over_http(server, admin, "bob")
    ended: dict[str, float] = {}

    def read_whole(name: str, response: httpx.Response) -> None:
        assert response.status_code == 200
        assert any(line == "data: [DONE]" for line in response.iter_lines())
        ended[name] = time.monotonic()

    hers = [long_stream(server, alice, tokens=1000) for _ in range(4)]  # each runs a second or more
    his = long_stream(server, bob, tokens=5)
    readers = [
        threading.Thread(target=read_whole, args=(name, response))
        for name, response in [*((f"alice {n}", r) for n, r in enumerate(hers)), ("bob", his)]
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=120)
    order = sorted(ended, key=ended.__getitem__)
    assert len(order) == 5 and order.index("bob") <= 2, order


def test_256_streamed_chats_at_once_are_all_answered(make_server: Callable[..., Server]) -> None:
    """A burst on an idle server: 32 decode together, the rest queue (QATUNE_SERVE_MAX_WAITING
    is 256 beyond the batch), none is refused; all from one address, at its default cap."""
    import asyncio

    server = make_server()
    admin = login_over_http(server)
    body = {
        "model": "builtin:tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "stream": True,
    }

    async def one(client: httpx.AsyncClient, n: int) -> tuple[int, bool]:
        request = {**body, "messages": [{"role": "user", "content": f"question {n}"}]}
        async with client.stream("POST", "/v1/chat/completions", json=request) as response:
            lines = [line async for line in response.aiter_lines()]
        return response.status_code, "data: [DONE]" in lines

    async def burst() -> list[tuple[int, bool]]:
        limits = httpx.Limits(max_connections=300)
        async with httpx.AsyncClient(
            base_url=server.url, headers=admin, timeout=300, limits=limits
        ) as client:
            return await asyncio.gather(*(one(client, n) for n in range(256)))

    started = time.monotonic()
    results = asyncio.run(burst())
    print(f"\n256 streamed chats at once answered in {time.monotonic() - started:.1f} s")
    assert [status for status, _ in results].count(200) == 256, results
    assert all(done for _, done in results)


def test_chats_sent_at_once_on_postgresql_are_all_answered(
    make_server: Callable[..., Server], postgres_url: str, postgres_template: str
) -> None:
    """120 chats at once through the official client, on PostgreSQL, whose pool holds 30
    connections against the 40 threads requests hop through. Before, each request held its
    connection from its user's lookup to its answer: the threads waited for a connection,
    the connections' requests for a thread, and after the pool's 30 s all failed with 500."""
    import asyncio

    from tests.postgres import fresh_database

    database = fresh_database(postgres_url, template=postgres_template)
    server = make_server(QATUNE_DATABASE_URL=database)
    token = login_over_http(server)["Authorization"].removeprefix("Bearer ")

    async def burst() -> list[str]:
        client = openai.AsyncOpenAI(
            base_url=f"{server.url}/v1", api_key=token, max_retries=0, timeout=120
        )

        async def one(n: int) -> str:
            try:
                answer = await client.chat.completions.create(
                    model="builtin:tiny",
                    messages=[{"role": "user", "content": f"question {n}"}],
                    max_tokens=8,
                )
            except openai.APIError as exc:
                return f"{type(exc).__name__}: {exc}"
            return answer.choices[0].finish_reason

        async with client:
            return await asyncio.gather(*(one(n) for n in range(120)))

    finished = asyncio.run(burst())
    failed = [answer for answer in finished if answer not in ("stop", "length")]
    assert not failed, failed[:3]
