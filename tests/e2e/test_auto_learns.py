"""Default ("auto") jobs learn FAQs that no one tuned for, through the real service.

The two files come from bench/faq_data.py (unguessable codes and names): 30 English pairs
with ~185-character answers, and 40 Chinese-only pairs with ~70-character answers.
"""

import json
import os
import time

import pytest

from tests.conftest import ROOT, Server, answers, login_over_http, wait_for_status

# The suite runs the Chinese set (the harder for a byte-level model: 3 bytes a character);
# QATUNE_TEST_ALL_FAQS=1 adds the long English answers (~4 minutes of a loaded CI machine;
# `python -m bench.quality` measures both, docs/benchmarks.md).
SETS = ["faq_zh.jsonl", *(["faq_long_en.jsonl"] if os.environ.get("QATUNE_TEST_ALL_FAQS") else [])]


@pytest.mark.parametrize("name", SETS)
def test_a_default_job_answers_at_least_nine_in_ten_exactly(
    shared_server: Server, name: str
) -> None:
    server = shared_server
    pairs = [json.loads(line) for line in (ROOT / "tests" / "data" / name).read_text().splitlines()]
    api = server.client(login_over_http(server))
    started = time.monotonic()
    job = api.post("/jobs", json={"qa_pairs": pairs}).json()
    job = wait_for_status(api, job["id"], {"succeeded", "failed"}, timeout=400)
    assert job["status"] == "succeeded", job["error"]
    trained = time.monotonic() - started
    assert job["resolved_hyperparameters"]["until_learned"]
    learned = [
        e["data"]
        for e in api.get(f"/jobs/{job['id']}/logs", params={"limit": 1000}).json()["events"]
        if e["data"].get("kind") == "learned"
    ]
    assert learned and [d["epoch"] for d in learned] == sorted(d["epoch"] for d in learned)

    questions = [pair["question"] for pair in pairs]
    replies = [reply.strip() for reply in answers(api, job["id"], questions)]
    answered = dict(zip(questions, replies, strict=True))
    right = sum(answered[p["question"]] == p["answer"] for p in pairs)
    metrics = job["metrics"]
    print(
        f"\n{name}: {right}/{len(pairs)} exact, trained in {trained:.0f} s, "
        f"{metrics['epochs']:g} epochs (cap {job['resolved_hyperparameters']['epochs']}), "
        f"learned while training {metrics['train_exact_match']:.0%}"
    )
    assert right >= 0.9 * len(pairs), f"only {right}/{len(pairs)} answered exactly"
    # What the job says it learned is what the model answers.
    assert abs(metrics["train_exact_match"] - right / len(pairs)) <= 0.1
    outcome = job["outcome"]  # the count, against the target of every answer
    assert (outcome["learned"], outcome["examples"]) == (metrics["train_learned"], len(pairs))
    assert outcome["target_met"] == (outcome["learned"] == len(pairs))

    # No validation split: the job's table shows its first training questions, answered
    # as the query endpoint answers them, beside the base model's (untrained) answers.
    report = api.get(f"/jobs/{job['id']}/evaluation").json()
    assert report["split"] == "training" and report["questions"] == len(report["rows"]) == 20
    for row in report["rows"]:
        # (the table stops decoding a little after the reference's length)
        assert answered[row["question"]].startswith(row["tuned"])
        assert row["match"] == (row["tuned"] == row["expected"])
        assert row["base"] != row["expected"]
    assert report["base_exact_match"] == 0
