"""Leaving a model before it stops (docs/leaving-openai.md), step by step as the page says:
its answers to the team's prompts recorded with scripts/record_answers.py and the official
client, an open model trained here on the recording as it was written, and an eval that
says how often the new model answers as the old one did.

OpenAI cannot be reached from here, so the "old model" is a model this server trained:
the script asks it through the same client, only `base_url` changed."""

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from openai import OpenAI

from tests.conftest import ROOT, Server, login_over_http, qa_pairs
from tests.e2e.test_openai_client import wait_for

pytestmark = pytest.mark.slow
PAIRS = 12


def test_a_recorded_model_is_trained_here_and_compared(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = make_server()
    token = login_over_http(server)["Authorization"].removeprefix("Bearer ")
    client = OpenAI(base_url=f"{server.url}/v1", api_key=token, max_retries=0)
    pairs = qa_pairs()[:PAIRS]

    # The old model, standing in for an ft:gpt-4o-mini… that is about to stop
    chat_lines = [
        {"messages": [{"role": "user", "content": p["question"]},
                      {"role": "assistant", "content": p["answer"]}]}
        for p in pairs
    ]  # fmt: skip
    old_file = client.files.create(
        file=("old.jsonl", "".join(json.dumps(r) + "\n" for r in chat_lines).encode()),
        purpose="fine-tune",
    )
    old = client.fine_tuning.jobs.create(model="builtin:tiny", training_file=old_file.id)
    old_model = wait_for(client, old.id, {"succeeded"}).fine_tuned_model

    # 1. Record its answers to the team's prompts (a fine-tuning file works as prompts)
    prompts, recorded = tmp_path / "prompts.jsonl", tmp_path / "recorded.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in chat_lines))

    def record() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "record_answers.py"), str(prompts),
             str(recorded), "--model", old_model, "--base-url", f"{server.url}/v1",
             "--api-key", token, "--max-tokens", "64"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    done = record()
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert len(lines) == PAIRS and all(r["messages"][-1]["role"] == "assistant" for r in lines)
    assert record().stderr == ""  # run again: everything was recorded, nothing asked twice
    assert len(recorded.read_text().splitlines()) == PAIRS

    # 2. Train an open model here on the recording, as it was written
    new_file = client.files.create(file=recorded.open("rb"), purpose="fine-tune")
    new = client.fine_tuning.jobs.create(
        model="builtin:tiny", training_file=new_file.id, suffix="after-openai"
    )
    new_job = wait_for(client, new.id, {"succeeded"})

    # 3. Compare: the new model's answers against the recorded ones, prompt by prompt
    job_id = int(new_job.id.removeprefix("ftjob-"))
    dataset_id = int(new_file.id.removeprefix("file-"))
    made = server.client(login_over_http(server)).post(
        f"/jobs/{job_id}/evals",
        json={"dataset_id": dataset_id, "criteria": ["similar"], "compare_base": False},
    )
    assert made.status_code == 201, made.text
    evaluation = made.json()
    deadline = time.monotonic() + 300
    while (run := client.evals.runs.retrieve(
        evaluation["run_ids"][0], eval_id=evaluation["eval_id"]
    )).status in ("queued", "in_progress"):  # fmt: skip
        assert time.monotonic() < deadline
        time.sleep(0.5)
    counts = run.result_counts
    share = counts.passed / counts.total
    print(f"\nmatches the old model on {share:.0%} of prompts ({counts.passed} of {counts.total})")
    assert counts.total == PAIRS and share >= 0.9
