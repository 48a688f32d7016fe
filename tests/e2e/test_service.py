"""The real thing: a server process, plain HTTP as curl would send it, real training."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    ADMIN_PASSWORD,
    QA_FILE,
    ROOT,
    Server,
    prepare_data_dir,
    qa_pairs,
    run_qatune,
    service_env,
    wait_for_status,
)

pytestmark = pytest.mark.slow


def signed_in(server: Server) -> httpx.Client:
    token = httpx.post(
        f"{server.url}/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD}
    ).json()
    return server.client({"Authorization": f"Bearer {token['access_token']}"})


@pytest.fixture
def server(make_server: Callable[..., Server], database_url: str | None) -> Server:
    """The service's main paths on both databases: its SQLite file, a PostgreSQL server."""
    return make_server(**({"QATUNE_DATABASE_URL": database_url} if database_url else {}))


@pytest.fixture
def sqlite_server(shared_server: Server) -> Server:
    """For what the database does not change: the stream's framing, pause and resume (their
    state changes run on PostgreSQL in tests/services/test_jobs.py, cancels through this
    server on both, a kill on PostgreSQL here and on SQLite in
    tests/reliability/test_crashes.py). Each looks at its own job only: the worker's shared
    server, on SQLite."""
    return shared_server


@pytest.fixture
def cli_env(tmp_path: Path, model_cache: Path) -> dict[str, str]:
    """For the command line, which needs no server: a data directory of its own."""
    data_dir = tmp_path / "data"
    prepare_data_dir(data_dir, model_cache)
    return service_env(data_dir)


def test_live_stream_follows_a_running_job(sqlite_server: Server) -> None:
    server = sqlite_server
    api = signed_in(server)
    job = api.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:8], "hyperparameters": {"max_steps": 6}}
    ).json()
    kinds = []
    with api.stream("GET", f"/jobs/{job['id']}/logs/stream") as stream:
        for line in stream.iter_lines():
            if line.startswith("data: ") and '"seq"' in line:
                data = json.loads(line[6:])["data"]
                kinds.append(data.get("status") or data.get("kind"))
            if line.startswith("event: end"):
                break
    assert "progress" in kinds and "succeeded" in kinds


def test_cancel_a_running_job(server: Server) -> None:
    api = signed_in(server)
    job = api.post(
        "/jobs", json={"qa_pairs": qa_pairs(), "hyperparameters": {"epochs": 100}}
    ).json()
    deadline = time.monotonic() + 120
    while api.get(f"/jobs/{job['id']}").json()["progress"]["step"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    asked = time.monotonic()
    assert api.post(f"/jobs/{job['id']}/cancel").json()["cancel_requested"]
    final = wait_for_status(api, job["id"], {"cancelled", "failed", "succeeded"}, timeout=30)
    assert final["status"] == "cancelled"
    assert time.monotonic() - asked < 15
    assert not list((server.data_dir / "jobs").glob("*/adapter"))
    assert httpx.get(f"{server.url}/health").json()["training_job"] is None


# On PostgreSQL: on SQLite, reliability/test_crashes.py kills the service four times at
# random with two jobs and holds each to the same (queued again, resumed, ended whole).
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_server_killed_mid_training_resumes_the_job_from_its_checkpoint(server: Server) -> None:
    api = signed_in(server)
    job = api.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:10], "hyperparameters": {"epochs": 20}}
    ).json()
    deadline = time.monotonic() + 120
    while not api.get(f"/jobs/{job['id']}").json()["checkpoint_step"]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    server.kill()  # SIGKILL: no cleanup, the job is left "running" in the database
    time.sleep(1)
    server.start()
    api = signed_in(server)
    final = wait_for_status(api, job["id"], {"succeeded", "failed"}, timeout=300)
    assert final["status"] == "succeeded" and final["attempts"] == 2
    assert final["failures"] == 0  # a restart of the service is not the job's failure
    events = api.get(f"/jobs/{job['id']}/logs?limit=1000").json()["events"]
    messages = [e["message"] for e in events]
    assert any("Re-queued (its worker process died)" in m for m in messages)
    resumed = [e["data"]["step"] for e in events if e["data"].get("kind") == "resumed"]
    assert resumed and resumed[0] > 0
    steps = [e["data"]["step"] for e in events if e["data"].get("kind") == "progress"]
    assert steps[-1] == final["progress"]["total_steps"]


def test_pause_resume_and_ask_a_checkpoint(sqlite_server: Server) -> None:
    server = sqlite_server
    api = signed_in(server)
    pairs = qa_pairs()[:10]
    job = api.post("/jobs", json={"qa_pairs": pairs, "hyperparameters": {"epochs": 30}}).json()
    deadline = time.monotonic() + 120
    while api.get(f"/jobs/{job['id']}").json()["progress"]["step"] < 3:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert api.post(f"/jobs/{job['id']}/pause").json()["pause_requested"]
    paused = wait_for_status(api, job["id"], {"paused", "failed", "succeeded"}, timeout=60)
    assert paused["status"] == "paused" and paused["checkpoint_step"] >= 3
    assert api.post(f"/jobs/{job['id']}/pause").status_code == 409
    checkpoints = api.get(f"/jobs/{job['id']}/checkpoints").json()
    assert checkpoints[-1]["step"] == paused["checkpoint_step"]
    answer = api.post(
        f"/jobs/{job['id']}/query",
        json={"question": pairs[0]["question"], "checkpoint_step": paused["checkpoint_step"]},
    )
    assert answer.status_code == 200, answer.text
    missing = api.post(
        f"/jobs/{job['id']}/query", json={"question": "q", "checkpoint_step": 999999}
    )
    assert missing.status_code == 404 and "checkpoints" in missing.json()["detail"]
    assert api.post(f"/jobs/{job['id']}/resume").json()["status"] == "queued"
    final = wait_for_status(api, job["id"], {"succeeded", "failed"}, timeout=300)
    assert final["status"] == "succeeded", final["error"]
    events = api.get(f"/jobs/{job['id']}/logs?limit=1000").json()["events"]
    resumed = [e["data"]["step"] for e in events if e["data"].get("kind") == "resumed"]
    assert resumed == [paused["checkpoint_step"]]


def test_cli_train_writes_adapter_and_metrics(tmp_path: Path, cli_env: dict[str, str]) -> None:
    metrics_file = tmp_path / "metrics.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "train",
            "--base-model",
            "builtin:tiny",
            "--data",
            str(QA_FILE),
            "--output",
            str(tmp_path / "adapter"),
            "--max-steps",
            "3",
            "--batch-size",
            "8",
            "--lora-rank",
            "4",
            "--metrics-json",
            str(metrics_file),
        ],
        cwd=ROOT,
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads(metrics_file.read_text())
    for key in (
        "train_tokens",
        "train_runtime_s",
        "tokens_per_second",
        "final_loss",
        "train_loss",
        "device",
        "dtype",
    ):
        assert key in metrics, key
    assert metrics["train_steps"] == 3
    assert (tmp_path / "adapter" / "adapter_model.safetensors").exists()


def test_cli_rejects_a_bad_file_clearly(tmp_path: Path, cli_env: dict[str, str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    result = run_qatune(cli_env, "train", "--data", str(bad), "--output", str(tmp_path))
    assert result.returncode == 2 and "missing field" in result.stderr


def test_cli_trains_then_answers_and_reports_the_device(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    adapter = tmp_path / "adapter"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_qatune(cli_env, *args)

    data = tmp_path / "eight.jsonl"  # defaults learn 8 pairs as they learn 30, in less time
    data.write_text("".join(json.dumps(pair) + "\n" for pair in qa_pairs()[:8]))
    trained = cli("train", "--data", str(data), "--output", str(adapter))
    assert trained.returncode == 0, trained.stderr[-2000:]
    pair = qa_pairs()[5]
    asked = cli("ask", "--adapter", str(adapter), pair["question"])
    assert asked.returncode == 0 and asked.stdout.strip() == pair["answer"]
    assert asked.stderr.strip() == ""  # quiet: no progress bars, warnings or log lines
    told = cli("ask", "--verbose", "--adapter", str(adapter), pair["question"])
    assert told.stdout.strip() == pair["answer"] and " loaded on cpu in " in told.stderr
    missing = cli("ask", "--adapter", str(tmp_path / "nope"), "q")
    assert missing.returncode == 1 and "incomplete" in missing.stderr

    # SFT then DPO: one answer moved, the other seven kept (and counted: the moved one is
    # the job's to change, not to keep)
    preferred = "Ask at the front desk, please."
    preferences = tmp_path / "prefer.jsonl"
    preferences.write_text(json.dumps({
        "input": {"messages": [{"role": "user", "content": pair["question"]}]},
        "preferred_output": [{"role": "assistant", "content": preferred}],
        "non_preferred_output": [{"role": "assistant", "content": pair["answer"]}],
    }) + "\n")  # fmt: skip
    alone = cli("train", "--data", str(preferences), "--output", str(tmp_path / "x"),
                "--keep-data", str(data))  # fmt: skip
    assert alone.returncode == 2 and "give both" in alone.stderr
    moved, metrics = tmp_path / "moved", tmp_path / "dpo.json"
    dpo = cli("train", "--data", str(preferences), "--output", str(moved), "--start-from",
              str(adapter), "--keep-data", str(data), "--metrics-json", str(metrics))  # fmt: skip
    assert dpo.returncode == 0, dpo.stderr[-2000:]
    assert cli("ask", "--adapter", str(moved), pair["question"]).stdout.strip() == preferred
    counted = json.loads(metrics.read_text())
    assert counted["keep_answers"] == 7 and counted["kept_answers"] == 7, counted

    benchmarked = cli("device", "--benchmark", "--json")  # the report, after a benchmark
    assert benchmarked.returncode == 0, benchmarked.stderr[-2000:]
    report = json.loads(benchmarked.stdout)
    for key in ("device", "precision", "memory_budget_gb", "reasons"):
        assert key in report
    recorded = report["benchmark"]
    assert recorded["winner"] == "cpu" and recorded["results"]["cpu"]["tokens_per_second"] > 0


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"QATUNE_DEVICE": "cuda"}, "QATUNE_DEVICE=cuda but torch.cuda.is_available() is False"),
        ({"QATUNE_DEVICE": "mps"}, "MPS is not available"),
        ({"QATUNE_SECRET_KEY": "changeme"}, "QATUNE_SECRET_KEY is a placeholder"),
        ({"QATUNE_MPS_HIGH_WATERMARK_RATIO": "0.8"}, "QATUNE_MPS_LOW_WATERMARK_RATIO"),
        ({"QATUNE_ADMIN_PASSWORD": "short"}, "QATUNE_ADMIN_PASSWORD is refused: the password"),
        ({"QATUNE_ADMIN_PASSWORD": "password123"}, "common password"),
        ({"QATUNE_SECRET_KEY": "a" * 40}, "QATUNE_SECRET_KEY is too predictable"),
    ],
)
def test_bad_settings_stop_the_service_at_start_with_one_clear_line(
    tmp_path: Path, setting: dict[str, str], message: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QATUNE_")}
    env |= {"QATUNE_DATA_DIR": str(tmp_path), "QATUNE_LOG_DIR": str(tmp_path), **setting}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--port", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
