"""Reinforcement jobs through both APIs: a grader, OpenAI's hyperparameters, and 4xx that
name the field for what OpenAI would refuse (the training itself:
tests/ml/training/test_reinforcement.py, and through the official client
tests/e2e/test_graders.py)."""

from typing import Any

from fastapi.testclient import TestClient

from tests.api.test_openai_routes import jsonl, upload
from tests.conftest import EXACT_ANSWER, qa_pairs


def create(client: TestClient, headers: dict[str, str], file_id: str, method: Any) -> Any:
    body = {"model": "builtin:tiny", "training_file": file_id, "method": method}
    return client.post("/v1/fine_tuning/jobs", json=body, headers=headers)


def test_a_reinforcement_job_keeps_its_grader_in_both_apis(
    client: TestClient, alice: dict[str, str]
) -> None:
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:6]))
    hyperparameters = {"n_epochs": 2, "compute_multiplier": 0.5, "eval_interval": 3}
    method = {
        "type": "reinforcement",
        "reinforcement": {"grader": EXACT_ANSWER, "hyperparameters": hyperparameters},
    }
    made = create(client, alice, file_id, method)
    assert made.status_code == 200, made.text
    job = made.json()
    assert job["method"]["type"] == "reinforcement"
    given = job["method"]["reinforcement"]
    assert given["grader"]["name"] == "exact" and given["grader"]["operation"] == "eq"
    assert given["hyperparameters"]["compute_multiplier"] == 0.5  # 4 answers a prompt
    assert given["hyperparameters"]["eval_interval"] == 3
    native = client.get(f"/jobs/{job['id'].removeprefix('ftjob-')}", headers=alice).json()
    assert native["method"] == "reinforcement" and native["grader"]["type"] == "string_check"
    assert native["hyperparameters"]["group_size"] == 4 and native["hyperparameters"]["epochs"] == 2

    # Natively: a grader means reinforcement; its defaults show in the estimate.
    inline = client.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:6], "grader": EXACT_ANSWER}, headers=alice
    )
    assert inline.status_code == 201, inline.text
    assert inline.json()["method"] == "reinforcement"
    estimate = client.post(
        "/jobs/estimate", json={"qa_pairs": qa_pairs()[:6], "grader": EXACT_ANSWER}, headers=alice
    )
    assert estimate.status_code == 200, estimate.text
    resolved = estimate.json()["hyperparameters"]
    assert resolved["group_size"] == 8 and resolved["beta"] == 0.04
    assert resolved["until_learned"] is False and resolved["epochs"] == 4


def test_what_openai_refuses_is_a_400_naming_the_field(
    client: TestClient, alice: dict[str, str]
) -> None:
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    missing = create(client, alice, file_id, {"type": "reinforcement"})
    assert missing.status_code == 400
    assert missing.json()["error"]["param"] == "method.reinforcement.grader"

    wrong_grader = dict(EXACT_ANSWER, operation="sounds_like")
    bad = create(
        client, alice, file_id, {"type": "reinforcement", "reinforcement": {"grader": wrong_grader}}
    )
    assert bad.status_code == 400, bad.text
    assert "method.reinforcement.grader" in bad.json()["error"]["param"]

    reasoning = {"grader": EXACT_ANSWER, "hyperparameters": {"reasoning_effort": "high"}}
    refused = create(client, alice, file_id, {"type": "reinforcement", "reinforcement": reasoning})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "method.reinforcement.hyperparameters.reasoning_effort"
    assert "reasons" in error["message"]

    # python graders are off unless an administrator turns them on
    python = {"type": "python", "name": "p", "source": "def grade(sample, item):\n    return 1.0\n"}
    off = create(
        client, alice, file_id, {"type": "reinforcement", "reinforcement": {"grader": python}}
    )
    assert off.status_code == 400 and "QATUNE_PYTHON_GRADERS" in off.json()["error"]["message"]

    # a judge model that is not the user's
    judge = {
        "type": "score_model",
        "name": "judge",
        "model": "ft:builtin:tiny:someone:999",
        "input": [{"role": "user", "content": "Score {{sample.output_text}}"}],
    }
    unknown = create(
        client, alice, file_id, {"type": "reinforcement", "reinforcement": {"grader": judge}}
    )
    assert unknown.status_code == 400
    assert unknown.json()["error"]["param"] == "method.reinforcement.grader.model"


def test_the_native_api_says_which_fields_belong_to_which_method(
    client: TestClient, alice: dict[str, str]
) -> None:
    pairs = qa_pairs()[:4]
    no_grader = client.post(
        "/jobs", json={"qa_pairs": pairs, "method": "reinforcement"}, headers=alice
    )
    assert no_grader.status_code == 409  # the body is valid; the method needs more
    assert no_grader.json()["errors"][0]["field"] == "grader"
    stray = client.post(
        "/jobs",
        json={"qa_pairs": pairs, "method": "supervised", "grader": EXACT_ANSWER},
        headers=alice,
    )
    assert stray.status_code == 409 and stray.json()["errors"][0]["field"] == "grader"
    group = client.post(
        "/jobs", json={"qa_pairs": pairs, "hyperparameters": {"group_size": 4}}, headers=alice
    )
    assert group.status_code == 409
    assert group.json()["errors"][0]["field"] == "hyperparameters.group_size"
    preference = [
        {
            "input": {"messages": [{"role": "user", "content": p["question"]}]},
            "preferred_output": [{"role": "assistant", "content": p["answer"]}],
            "non_preferred_output": [{"role": "assistant", "content": "No."}],
        }
        for p in pairs
    ]
    dpo_data = client.post(
        "/jobs", json={"qa_pairs": preference, "grader": EXACT_ANSWER}, headers=alice
    )
    assert dpo_data.status_code == 409 and "dpo" in dpo_data.json()["detail"]


def test_openais_reinforcement_records_are_prompts_for_their_grader(
    client: TestClient, alice: dict[str, str]
) -> None:
    """A record of OpenAI's RFT file: the conversation so far (an earlier assistant turn
    is context, not an answer to learn), and fields the grader reads."""
    records = [
        {
            "messages": [
                {"role": "developer", "content": "Answer in one word."},
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hello! Ask me about capitals."},
                {"role": "user", "content": question},
            ],
            "reference_answer": answer,
        }
        for question, answer in [("Capital of France?", "Paris"), ("Capital of Japan?", "Tokyo")]
    ]
    file_id = upload(client, alice, "rft.jsonl", jsonl(records))
    supervised = create(client, alice, file_id, {"type": "supervised"})
    assert supervised.status_code == 400
    assert "reinforcement" in supervised.json()["error"]["message"]
    grader = dict(EXACT_ANSWER, reference="{{ item.reference_answer }}")
    made = create(
        client, alice, file_id, {"type": "reinforcement", "reinforcement": {"grader": grader}}
    )
    assert made.status_code == 200, made.text
    assert made.json()["method"]["reinforcement"]["grader"]["reference"] == grader["reference"]


def test_a_grader_that_cannot_read_the_data_is_refused_before_the_job_runs(
    client: TestClient, alice: dict[str, str]
) -> None:
    """It once ran 80 steps scoring nothing ("could not score 64 of 64 answers") and
    succeeded: the field its reference reads was missing."""
    records = [
        {"messages": [{"role": "user", "content": q}], "answer": a}
        for q, a in [("Capital of France?", "Paris"), ("Capital of Japan?", "Tokyo")]
    ]
    file_id = upload(client, alice, "rft.jsonl", jsonl(records))
    grader = dict(EXACT_ANSWER, reference="{{ item.reference_answer }}")
    made = create(
        client, alice, file_id, {"type": "reinforcement", "reinforcement": {"grader": grader}}
    )
    assert made.status_code == 400, made.text
    message = made.json()["error"]["message"]
    assert "item.reference_answer" in message and "example 1" in message
