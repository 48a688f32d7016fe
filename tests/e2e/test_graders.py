"""Graders and evals through the official `openai` client against a live server: a
fine-tuned model judges answers (score_model), python graders run confined, a multi grader
blends them, and evals run, cancel and fail as a user would see."""

import json
import secrets
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.conftest import Server, login_over_http, make_user_over_http
from tests.e2e.test_openai_client import api_key
from tests.graders.processes import gone

pytestmark = pytest.mark.slow

# What the judge is taught: a question, an answer, and whether the answer is right.
CASES = [
    ("Where do I reset my password?", "On the login page", "1"),
    ("Where do I reset my password?", "Call the sales team", "0"),
    ("How long does shipping take?", "Three business days", "1"),
    ("How long does shipping take?", "About a year", "0"),
    ("Can I pay by invoice?", "Yes, on the Business plan", "1"),
    ("Can I pay by invoice?", "Only in cash", "0"),
]
JUDGE_PROMPT = (
    "Is this answer right? Say 1 or 0.\nQ: {{ item.question }}\nA: {{ sample.output_text }}"
)


def judge_file() -> bytes:
    lines = []
    for question, answer, verdict in CASES:
        prompt = JUDGE_PROMPT.replace("{{ item.question }}", question)
        prompt = prompt.replace("{{ sample.output_text }}", answer)
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": verdict}]
        lines.append(json.dumps({"messages": messages}))
    return ("\n".join(lines) + "\n").encode()


def test_a_tuned_model_judges_graders_and_evals(make_server: Callable[..., Server]) -> None:
    """One judge trained, then: graders run through the official client (the judge, python
    confined, a blend), an eval of given answers, a slow run canceled, and a run whose judge
    is deleted midway."""
    server = make_server(QATUNE_PYTHON_GRADERS="true", QATUNE_PYTHON_GRADER_WALL_SECONDS="5")
    alice = make_user_over_http(server, login_over_http(server), "alice")
    client = OpenAI(
        base_url=f"{server.url}/v1", api_key=api_key(server, "alice", "alice-kettle-marble-57")
    )
    uploaded = client.files.create(file=("judge.jsonl", judge_file()), purpose="fine-tune")
    job = client.fine_tuning.jobs.create(
        model="builtin:tiny", training_file=uploaded.id, suffix="judge", seed=3
    )
    deadline = time.monotonic() + 600
    while (job := client.fine_tuning.jobs.retrieve(job.id)).status not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        assert time.monotonic() < deadline
        time.sleep(1)
    assert job.status == "succeeded" and job.fine_tuned_model, job

    judge: Any = {
        "type": "score_model",
        "name": "judge",
        "model": job.fine_tuned_model,
        "input": [{"role": "user", "content": JUDGE_PROMPT}],
    }
    assert client.fine_tuning.alpha.graders.validate(grader=judge).grader is not None
    for question, answer, verdict in CASES:
        graded = client.fine_tuning.alpha.graders.run(
            grader=judge,
            model_sample=answer,
            item={"question": question},
        )
        assert graded.reward == float(verdict), (question, answer, graded)
        assert graded.api_model_grader_token_usage_per_model[job.fine_tuned_model]

    # A python grader and a string check, blended; the judge too.
    contains = (
        "def grade(sample, item):\n"
        "    return float(item['keyword'].lower() in sample['output_text'].lower())\n"
    )
    blend: Any = {
        "type": "multi",
        "name": "blend",
        "graders": {
            "keyword": {"type": "python", "name": "keyword", "source": contains},
            "judge": judge,
        },
        "calculate_output": "0.5 * keyword + 0.5 * judge",
    }
    item = {"question": "Where do I reset my password?", "keyword": "login"}
    graded = client.fine_tuning.alpha.graders.run(
        grader=blend,
        model_sample="On the login page",
        item=item,
    )
    assert graded.reward == 1.0 and graded.sub_rewards == {"keyword": 1.0, "judge": 1.0}

    # A grader after the service's own data is stopped there; the service goes on.
    thief = (
        "def grade(sample, item):\n"
        f"    return float(len(open({str(server.data_dir / 'qatune.db')!r}, 'rb').read()))\n"
    )
    stolen = client.fine_tuning.alpha.graders.run(
        grader={"type": "python", "name": "thief", "source": thief},
        model_sample="x",
        item={},
    )
    # (the sandbox's view holds no such file: tests/graders/test_sandbox.py says more)
    assert stolen.reward == 0.0 and stolen.metadata.errors.python_grader_runtime_error
    details = stolen.metadata.errors.python_grader_runtime_error_details or ""
    assert "No such file or directory" in details
    assert client.models.retrieve(job.fine_tuned_model).id == job.fine_tuned_model

    # A client that gives up on a slow grader takes its sandbox with it.
    name = "qe" + secrets.token_hex(5)
    sleeper = (
        "import ctypes, time\n\ndef grade(sample, item):\n"
        f"    ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n    time.sleep(60)\n"
    )
    with pytest.raises(openai.APITimeoutError):
        client.with_options(timeout=2.0, max_retries=0).fine_tuning.alpha.graders.run(
            grader={"type": "python", "name": "sleeper", "source": sleeper},
            model_sample="x",
            item={},
        )
    assert gone(name, within=3.0)

    # An eval judged by the tuned model, on answers given in the data.
    schema: Any = {"type": "object", "properties": {"question": {"type": "string"}}}
    evaluation = client.evals.create(
        name="judged",
        data_source_config={"type": "custom", "item_schema": schema, "include_sample_schema": True},
        testing_criteria=[judge],
    )
    given: Any = [
        {"item": {"question": question}, "sample": {"output_text": answer}}
        for question, answer, _ in CASES
    ]
    made = client.evals.runs.create(
        evaluation.id,
        name="given answers",
        data_source={"type": "jsonl", "source": {"type": "file_content", "content": given}},
    )
    while (run := client.evals.runs.retrieve(made.id, eval_id=evaluation.id)).status in (
        "queued",
        "in_progress",
    ):
        time.sleep(0.3)
    assert run.status == "completed" and run.result_counts.passed == 3, run
    assert run.result_counts.failed == 3 and run.result_counts.errored == 0
    items = client.evals.runs.output_items.list(run.id, eval_id=evaluation.id)
    verdicts = {i.datasource_item_id: i.results[0].score for i in items}
    assert verdicts == {n: float(verdict) for n, (_, _, verdict) in enumerate(CASES)}
    assert run.report_url.startswith(server.url) and f"/runs/{run.id}" in run.report_url

    # A slow run (a python grader that sleeps), canceled: it stops at once, its graders
    # killed mid-sleep, and what was graded stays.
    name = "qv" + secrets.token_hex(5)
    slow = client.evals.create(
        name="slow",
        data_source_config={"type": "custom", "item_schema": schema},
        testing_criteria=[
            {
                "type": "python",
                "name": "slow",
                "source": "import ctypes, time\ndef grade(s, i):\n"
                f"    ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n"
                "    time.sleep(i['wait'])\n    return 1.0\n",
            }
        ],
    )
    quick, sleepy = {"question": "q", "wait": 0.1}, {"question": "q", "wait": 60}
    many: Any = {
        "type": "file_content",
        "content": [{"item": quick, "sample": {"output_text": "a"}}] * 8
        + [{"item": sleepy, "sample": {"output_text": "a"}}] * 52,
    }
    going = client.evals.runs.create(slow.id, data_source={"type": "jsonl", "source": many})
    while not client.evals.runs.output_items.list(going.id, eval_id=slow.id).data:
        time.sleep(0.2)
    time.sleep(1.0)  # the second batch's graders are asleep
    canceled = client.evals.runs.cancel(going.id, eval_id=slow.id)
    assert canceled.status == "canceled"
    assert gone(name, within=3.0)  # not after their minute of sleep
    after = client.evals.runs.retrieve(going.id, eval_id=slow.id)
    kept = len(client.evals.runs.output_items.list(going.id, eval_id=slow.id, limit=100).data)
    assert after.status == "canceled" and kept == 8

    # Two judges in one eval (the tuned model and its untrained base): each asked as itself.
    second: Any = dict(judge, name="base judge", model="builtin:tiny")
    two = client.evals.create(
        name="two judges",
        data_source_config={"type": "custom", "item_schema": schema},
        testing_criteria=[judge, second],
    )
    given_source: Any = {"type": "jsonl", "source": {"type": "file_content", "content": given}}
    made = client.evals.runs.create(two.id, data_source=given_source)
    while (run := client.evals.runs.retrieve(made.id, eval_id=two.id)).status in (
        "queued",
        "in_progress",
    ):
        time.sleep(0.3)
    assert run.status == "completed", run
    assert {u.run_model_name for u in run.per_model_usage} == {job.fine_tuned_model, "builtin:tiny"}

    # Reinforcement fine-tuning driven by the tuned judge and a python grader, blended:
    # OpenAI's reinforcement records (the prompt, and fields the graders read).
    records = [
        {"messages": [{"role": "user", "content": q}], "question": q, "keyword": k}
        for q, k in [
            ("Where do I reset my password?", "login"),
            ("How long does shipping take?", "days"),
            ("Can I pay by invoice?", "yes"),
            ("Where do I reset my password?", "page"),
        ]
    ]
    prompts = client.files.create(
        file=("rft.jsonl", "".join(json.dumps(r) + "\n" for r in records).encode()),
        purpose="fine-tune",
    )
    method: Any = {
        "type": "reinforcement",
        "reinforcement": {
            "grader": blend,
            "hyperparameters": {"n_epochs": 1, "batch_size": 4, "compute_multiplier": 0.25},
        },
    }
    rft = client.fine_tuning.jobs.create(
        model="builtin:tiny", training_file=prompts.id, method=method, suffix="rft"
    )
    while (rft := client.fine_tuning.jobs.retrieve(rft.id)).status not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        assert time.monotonic() < deadline + 300
        time.sleep(1)
    assert rft.status == "succeeded", rft.error
    asked = rft.method.reinforcement if rft.method else None
    assert asked is not None and asked.hyperparameters is not None
    assert asked.hyperparameters.compute_multiplier == 0.25
    events = httpx.get(
        f"{server.url}/jobs/{rft.id.removeprefix('ftjob-')}/logs", headers=alice, timeout=30
    ).json()
    steps = [e["data"] for e in events["events"] if (e["data"] or {}).get("kind") == "progress"]
    assert steps and all(0 <= s["reward_mean"] <= 1 for s in steps), steps
    chat = client.chat.completions.create(
        model=rft.fine_tuned_model or "", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    assert chat.choices[0].finish_reason in ("stop", "length")

    # The judge deleted midway: the run fails and says so.
    long: Any = {"type": "jsonl", "source": {"type": "file_content", "content": given * 100}}
    judged = client.evals.runs.create(evaluation.id, data_source=long)
    while not client.evals.runs.output_items.list(judged.id, eval_id=evaluation.id).data:
        time.sleep(0.1)
    client.models.delete(job.fine_tuned_model)
    deadline = time.monotonic() + 60
    while (ended := client.evals.runs.retrieve(judged.id, eval_id=evaluation.id)).status in (
        "queued",
        "in_progress",
    ):
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert ended.status == "failed", ended
    assert ended.error and "judge model" in ended.error.message, ended.error
