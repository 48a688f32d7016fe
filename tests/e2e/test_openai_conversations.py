"""A team moving off OpenAI: its multi-turn chat file trains unchanged, with defaults, and the
tuned model answers each conversation so far as it was trained (the official client)."""

import json

import httpx
import openai
import pytest
from openai import OpenAI

from tests.conftest import ADMIN_PASSWORD, ROOT, Server, login_over_http
from tests.e2e.test_openai_client import api_key, wait_for

pytestmark = pytest.mark.slow
SUPPORT_CHAT = ROOT / "tests" / "data" / "support_chat.jsonl"


def test_a_multi_turn_file_with_weights_trains_and_answers_in_context(
    shared_server: Server,
) -> None:
    server = shared_server
    admin = login_over_http(server)
    client = OpenAI(base_url=f"{server.url}/v1", api_key=api_key(server, "admin", ADMIN_PASSWORD))
    content = SUPPORT_CHAT.read_bytes()
    records = [json.loads(line) for line in content.decode().splitlines()]

    # The native API reads the same file: one pair per learned answer, its history kept.
    native = httpx.post(
        f"{server.url}/datasets",
        files={"file": ("support.jsonl", content)},
        headers=admin,
        timeout=30,
    )
    assert native.status_code == 201, native.text
    learned = sum(
        m["role"] == "assistant" and m.get("weight", 1) == 1 for r in records for m in r["messages"]
    )
    assert native.json()["num_examples"] == learned
    detail = httpx.get(f"{server.url}/datasets/{native.json()['id']}", headers=admin).json()
    assert [t["role"] for t in detail["preview"][0]["history"]] == []  # the first answer learned
    assert any(len(row["history"]) == 2 for row in detail["preview"])

    # A broken conversation is a 400 that names its line, through the OpenAI client too.
    broken = content + b'{"messages": [{"role": "user", "content": "hi"}, {"role": "tool"}]}\n'
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.create(file=("broken.jsonl", broken), purpose="fine-tune")
    said = str(refused.value)  # a tool's result with no content
    assert f"line {len(records) + 1}" in said and 'missing field "messages[1].content"' in said

    uploaded = client.files.create(file=("support.jsonl", content), purpose="fine-tune")
    job = client.fine_tuning.jobs.create(model="builtin:tiny", training_file=uploaded.id)
    done = wait_for(client, job.id, {"succeeded", "failed", "cancelled"}, timeout=600)
    assert done.status == "succeeded", done.error

    # Each final answer, asked with the conversation so far (weight-0 turns included).
    exact = 0
    for record in records:
        *so_far, final = record["messages"]
        asked = [{"role": m["role"], "content": m["content"]} for m in so_far]
        reply = client.chat.completions.create(
            model=done.fine_tuned_model,
            messages=asked,  # type: ignore[arg-type]  # (the records' own dicts)
            temperature=0,
        )
        exact += reply.choices[0].message.content == final["content"]
    print(f"\n{exact}/{len(records)} final answers exact, asked in their conversation")
    assert exact >= 0.9 * len(records)
