"""Fine-tuning a fine-tuned model: the new job starts from the old one's weights, keeps its
own copy of them, and records where it came from."""

import io
import json
import zipfile
from typing import Any

import httpx
import pytest
from openai import NotFoundError, OpenAI

from tests.conftest import (
    Server,
    login_over_http,
    make_user_over_http,
    qa_pairs,
    unique,
    wait_for_status,
)
from tests.e2e.test_openai_client import api_key

pytestmark = pytest.mark.slow


def losses(client: httpx.Client, job_id: int) -> list[float]:
    events = client.get(f"/jobs/{job_id}/logs", params={"limit": 1000}).json()["events"]
    return [e["data"]["loss"] for e in events if e["data"].get("kind") == "progress"]


def test_a_model_trained_further_starts_where_it_ended_and_outlives_it(
    shared_server: Server,
) -> None:
    server = shared_server
    admin = login_over_http(server)
    alice_name, bob_name = unique("alice"), unique("bob")
    make_user_over_http(server, admin, alice_name)
    alice = server.client(login_over_http(server, alice_name, f"{alice_name}-kettle-marble-57"))
    pairs = qa_pairs()[:6]
    body: dict[str, Any] = {"qa_pairs": pairs, "hyperparameters": {"lora_r": 8}}
    first = alice.post("/jobs", json=body).json()
    assert wait_for_status(alice, first["id"], {"succeeded", "failed"})["status"] == "succeeded"

    # Another LoRA shape than the starting model's is refused, saying which.
    other_shape = {"qa_pairs": pairs, "hyperparameters": {"lora_r": 4}}
    clash = alice.post("/jobs", json={**other_shape, "base_job_id": first["id"]})
    assert clash.status_code == 422 and "lora_r=8" in clash.json()["detail"], clash.text
    again = {"qa_pairs": pairs, "base_job_id": first["id"]}  # until learned: at once
    second = alice.post("/jobs", json=again).json()
    assert (second["base_job_id"], second["base_model"]) == (first["id"], "builtin:tiny")
    assert second["start_model"] == f"ft:builtin:tiny:{alice_name}::ftjob-{first['id']}"
    done = wait_for_status(alice, second["id"], {"succeeded", "failed"})
    assert done["status"] == "succeeded", done["error"]
    assert done["resolved_hyperparameters"]["lora_r"] == 8

    # It began where the first ended: its first loss is the first job's last, not its first.
    before, after = losses(alice, first["id"]), losses(alice, second["id"])
    print(f"\nfirst job: loss {before[0]:.3f} → {before[-1]:.3f}; trained further from "
          f"{after[0]:.3f} → {after[-1]:.3f}")  # fmt: skip
    assert after[0] < 0.25 * before[0]

    # The starting model deleted: the new one still answers, and says where it came from.
    assert alice.delete(f"/v1/models/{second['start_model']}").status_code == 200
    asked = alice.post(f"/jobs/{second['id']}/query", json={"question": pairs[0]["question"]})
    assert asked.status_code == 200 and asked.json()["answer"] == pairs[0]["answer"]
    adapter = zipfile.ZipFile(io.BytesIO(alice.get(f"/jobs/{second['id']}/adapter").content))
    card = next(n for n in adapter.namelist() if n.endswith("README.md"))
    assert f"`{second['start_model']}`, trained further" in adapter.read(card).decode()

    # Through the OpenAI API: an ft: model as `model`; another user's is a 404.
    client = OpenAI(
        base_url=f"{server.url}/v1",
        api_key=api_key(server, alice_name, f"{alice_name}-kettle-marble-57"),
    )
    uploaded = client.files.create(
        file=("faq.jsonl", "\n".join(map(_jsonl, pairs)).encode()), purpose="fine-tune"
    )
    tuned = f"ft:builtin:tiny:{alice_name}::ftjob-{second['id']}"
    third = client.fine_tuning.jobs.create(
        model=tuned, training_file=uploaded.id, hyperparameters={"n_epochs": 1}
    )
    assert third.model == tuned
    make_user_over_http(server, admin, bob_name)
    bob = OpenAI(
        base_url=f"{server.url}/v1",
        api_key=api_key(server, bob_name, f"{bob_name}-kettle-marble-57"),
    )
    theirs = bob.files.create(file=("faq.jsonl", _jsonl(pairs[0]).encode()), purpose="fine-tune")
    with pytest.raises(NotFoundError):
        bob.fine_tuning.jobs.create(model=tuned, training_file=theirs.id)
    client.fine_tuning.jobs.cancel(third.id)


def _jsonl(pair: dict[str, str]) -> str:
    return json.dumps(pair)
