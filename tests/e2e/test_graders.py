"""Graders through the official `openai` client against a live server: a fine-tuned model
judges answers (score_model), python graders run confined, and a multi grader blends them."""

import json
import time
from collections.abc import Callable

import pytest
from openai import OpenAI

from tests.conftest import Server, login_over_http, make_user_over_http
from tests.e2e.test_openai_client import api_key

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


def test_a_tuned_model_judges_and_python_graders_run_confined(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(QATUNE_PYTHON_GRADERS="true", QATUNE_PYTHON_GRADER_WALL_SECONDS="5")
    make_user_over_http(server, login_over_http(server), "alice")
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

    judge = {
        "type": "score_model",
        "name": "judge",
        "model": job.fine_tuned_model,
        "input": [{"role": "user", "content": JUDGE_PROMPT}],
    }
    assert client.fine_tuning.alpha.graders.validate(grader=judge).grader is not None  # type: ignore[arg-type]
    for question, answer, verdict in CASES:
        graded = client.fine_tuning.alpha.graders.run(
            grader=judge,  # type: ignore[arg-type]
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
    blend = {
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
        grader=blend,  # type: ignore[arg-type]
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
    assert stolen.reward == 0.0 and stolen.metadata.errors.python_grader_runtime_error
    assert "Permission denied" in (stolen.metadata.errors.python_grader_runtime_error_details or "")
    assert client.models.retrieve(job.fine_tuned_model).id == job.fine_tuned_model
