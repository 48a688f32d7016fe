"""SFT, then DPO on the tuned model, as a team moving off OpenAI runs it with the official
client: preference pairs move the model from its old answers to the preferred ones."""

import json
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.conftest import ADMIN_PASSWORD, ROOT, Server, login_over_http
from tests.e2e.test_openai_client import api_key, wait_for

pytestmark = pytest.mark.slow
CHANGES = [json.loads(line) for line in (ROOT / "tests/data/faq_changes.jsonl").open()]


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


def ask(client: OpenAI, model: str, question: str) -> str:
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], temperature=0
    )
    return reply.choices[0].message.content or ""


def test_dpo_after_sft_moves_the_answers_to_the_preferred_ones(server: Server) -> None:
    client = OpenAI(base_url=f"{server.url}/v1", api_key=api_key(server, "admin", ADMIN_PASSWORD))
    chat = [
        {"messages": [{"role": "user", "content": c["question"]},
                      {"role": "assistant", "content": c["old"]}]}
        for c in CHANGES
    ]  # fmt: skip
    sft_file = client.files.create(file=("faq.jsonl", jsonl(chat)), purpose="fine-tune")
    sft = client.fine_tuning.jobs.create(model="builtin:tiny", training_file=sft_file.id)
    sft = wait_for(client, sft.id, {"succeeded", "failed"}, timeout=600)
    assert sft.status == "succeeded", sft.error
    old = sum(ask(client, sft.fine_tuned_model, c["question"]) == c["old"] for c in CHANGES)

    preferences = [
        {
            "input": {"messages": [{"role": "user", "content": c["question"]}]},
            "preferred_output": [{"role": "assistant", "content": c["new"]}],
            "non_preferred_output": [{"role": "assistant", "content": c["old"]}],
        }
        for c in CHANGES
    ]
    prefs = client.files.create(file=("prefs.jsonl", jsonl(preferences)), purpose="fine-tune")
    # A preference file is DPO's: supervised on it is a 400 that says so.
    with pytest.raises(openai.BadRequestError, match="method dpo"):
        client.fine_tuning.jobs.create(model=sft.fine_tuned_model, training_file=prefs.id)
    dpo = client.fine_tuning.jobs.create(
        model=sft.fine_tuned_model,
        training_file=prefs.id,
        method={"type": "dpo", "dpo": {"hyperparameters": {"beta": 0.1}}},
    )
    assert dpo.model == sft.fine_tuned_model and dpo.method and dpo.method.type == "dpo"
    dpo = wait_for(client, dpo.id, {"succeeded", "failed"}, timeout=600)
    assert dpo.status == "succeeded", dpo.error
    assert dpo.method and dpo.method.dpo and dpo.method.dpo.hyperparameters
    assert dpo.method.dpo.hyperparameters.beta == 0.1

    # Each step reports DPO's loss with the reward margin and accuracy.
    metrics = [e.data for e in client.fine_tuning.jobs.list_events(dpo.id, limit=100)]
    steps = [m for m in metrics if isinstance(m, dict) and m.get("reward_margin") is not None]
    assert steps and all(0 <= m["reward_accuracy"] <= 1 for m in steps)
    native = httpx.get(
        f"{server.url}/jobs/{dpo.id.removeprefix('ftjob-')}",
        headers=login_over_http(server),
    ).json()
    assert native["method"] == "dpo" and native["resolved_hyperparameters"]["beta"] == 0.1

    moved = sum(ask(client, dpo.fine_tuned_model, c["question"]) == c["new"] for c in CHANGES)
    print(f"\nSFT: {old}/{len(CHANGES)} old answers; after DPO: {moved}/{len(CHANGES)} preferred")
    assert old >= 0.9 * len(CHANGES) and moved >= 0.8 * len(CHANGES)
