"""`qatune backup` while a job trains, `qatune restore` into a new data directory: the same
users, jobs and models, as a new instance (earlier tokens refused), the running job
queued again once and finished there from its checkpoint."""

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    Server,
    login_over_http,
    prepare_data_dir,
    qa_pairs,
    run_qatune,
    service_env,
    start_server,
    wait_for_status,
)

pytestmark = pytest.mark.slow


def test_a_backup_taken_while_a_job_trains_restores_as_a_new_instance(
    make_server: Callable[..., Server], tmp_path: Path, model_cache: Path
) -> None:
    server = make_server()
    admin = login_over_http(server)
    client = server.client(admin)
    pair = qa_pairs()[0]
    done = client.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:4], "hyperparameters": {"max_steps": 2}}
    )
    wait_for_status(client, done.json()["id"], {"succeeded"})
    answer = client.post(f"/jobs/{done.json()['id']}/query", json={"question": pair["question"]})
    running = client.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:8], "hyperparameters": {"epochs": 24}}
    )
    running_id = running.json()["id"]
    wait_for_status(client, running_id, {"running"}, timeout=120)
    while client.get(f"/jobs/{running_id}").json()["checkpoint_step"] is None:
        time.sleep(0.2)  # until its first checkpoint: a restore goes on from there

    backup = tmp_path / "backup"
    made = run_qatune(server.env, "backup", str(backup))  # while the job trains
    assert made.returncode == 0, made.stderr[-2000:]
    assert (backup / "qatune-backup.json").exists() and (backup / "qatune.db").exists()
    refused = run_qatune(server.env, "backup", str(backup))
    assert refused.returncode == 1 and "not empty" in refused.stderr
    server.stop()

    data_dir = tmp_path / "restored"
    prepare_data_dir(data_dir, model_cache)
    env = service_env(data_dir)
    told = run_qatune(env, "restore", str(backup))
    assert told.returncode == 0, told.stderr[-2000:]
    assert f"jobs [{running_id}]" in told.stdout
    again = start_server(data_dir, model_cache)
    try:
        old_token = httpx.get(f"{again.url}/jobs/{running_id}", headers=admin)
        assert old_token.status_code == 401  # a new instance: sign in again
        client = again.client(login_over_http(again))
        asked = client.post(f"/jobs/{done.json()['id']}/query", json={"question": pair["question"]})
        assert asked.json()["answer"] == answer.json()["answer"]  # the same model
        final = wait_for_status(client, running_id, {"succeeded", "failed"}, timeout=300)
        assert final["status"] == "succeeded" and final["failures"] == 0, final["error"]
        events = client.get(f"/jobs/{running_id}/logs", params={"limit": 1000}).json()["events"]
        requeued = [e for e in events if "restored from a backup" in e["message"]]
        resumed = [e for e in events if e["data"].get("kind") == "resumed"]
        assert len(requeued) == 1 and len(resumed) == 1 and resumed[0]["data"]["step"] > 0
    finally:
        again.stop()
    in_use = run_qatune(env, "restore", str(backup))
    assert in_use.returncode == 1 and "is in use" in in_use.stderr
