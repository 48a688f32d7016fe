"""Function calling with the official `openai` client against a live server: a file of
tools, calls and results trains on a base whose chat template writes tools, and the tuned
model, offered the same tools, calls them with the arguments it learned (whole and
streamed), then answers from the tool's result."""

import io
import json
from pathlib import Path
from typing import Any, cast

import httpx
import openai
import pytest
from openai import OpenAI

from tests.conftest import ADMIN_PASSWORD, SKIES, WEATHER_TOOL, Server, tool_records
from tests.e2e.test_openai_client import api_key, as_openai_types, wait_for

pytestmark = pytest.mark.slow


def test_a_tuned_model_calls_its_tools_and_answers_from_their_results(
    shared_server: Server, tool_model: Path
) -> None:
    server = shared_server
    client = OpenAI(base_url=f"{server.url}/v1", api_key=api_key(server, "admin", ADMIN_PASSWORD))
    lines = "".join(json.dumps(record) + "\n" for record in tool_records())
    uploaded = client.files.create(file=("tools.jsonl", io.BytesIO(lines.encode())),
                                   purpose="fine-tune")  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="writes no tools"):
        client.fine_tuning.jobs.create(model="builtin:tiny", training_file=uploaded.id)
    job = client.fine_tuning.jobs.create(
        model=str(tool_model),
        training_file=uploaded.id,
        hyperparameters={"learning_rate_multiplier": 2},  # auto epochs: until learned
    )
    job = wait_for(client, job.id, {"succeeded", "failed"}, timeout=600)
    assert job.status == "succeeded", job.error
    model, tools = job.fine_tuned_model, cast(Any, [WEATHER_TOOL])
    # The job's answer table compares a call as the template writes it
    native = httpx.get(
        f"{server.url}/jobs/{job.id.removeprefix('ftjob-')}/evaluation",
        headers={"Authorization": f"Bearer {client.api_key}"},
        timeout=30,
    )
    rows = {(row["question"], row["expected"]): row for row in native.json()["rows"]}
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert rows[("What is the weather in Paris?", call)]["match"], rows

    right = 0
    for city, sky in SKIES.items():
        asked: Any = [{"role": "user", "content": f"What is the weather in {city}?"}]
        reply = client.chat.completions.create(
            model=model,
            messages=asked,
            tools=tools,
            temperature=0,
        )
        as_openai_types(reply)
        choice = reply.choices[0]
        calls: list[Any] = list(choice.message.tool_calls or [])
        if [(c.function.name, json.loads(c.function.arguments)) for c in calls] != [
            ("get_weather", {"city": city})
        ]:
            continue
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        # The call and its result sent back, as a client's tool loop does
        result: Any = {
            "role": "tool",
            "tool_call_id": calls[0].id,
            "content": json.dumps({"sky": sky}),
        }
        then = client.chat.completions.create(
            model=model,
            messages=[*asked, cast(Any, choice.message.to_dict()), result],
            tools=tools,
            temperature=0,
        )
        right += then.choices[0].message.content == f"It is {sky} in {city} today."
    assert right >= 4, right  # of 5

    # Streamed: the call comes whole, in one delta, once the answer has ended
    stream: Any = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=tools,
        temperature=0,
        stream=True,
    )
    chunks = list(stream)
    as_openai_types(*chunks)
    streamed: list[Any] = [
        c for chunk in chunks for d in chunk.choices for c in d.delta.tool_calls or []
    ]
    assert [(c.function.name, c.function.arguments) for c in streamed] == [
        ("get_weather", '{"city": "Paris"}')
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # A question outside the tool: answered in words, no call
    other = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Who founded Oslo?"}],
        tools=tools,
        temperature=0,
    )  # fmt: skip
    assert other.choices[0].message.tool_calls is None
    assert other.choices[0].message.content == "I can only tell you the weather."

    # What cannot be done says so: a forced call; tools to a model whose template has none
    with pytest.raises(openai.BadRequestError, match="cannot force a tool call"):
        client.chat.completions.create(
            model=model,
            messages=asked,
            tools=tools,
            tool_choice="required",
        )
    with pytest.raises(openai.BadRequestError, match="writes no tools") as refused:
        client.chat.completions.create(model="builtin:tiny", messages=asked, tools=tools)
    assert refused.value.param == "tools"
