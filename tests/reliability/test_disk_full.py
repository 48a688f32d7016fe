"""A full disk is a state, not a mystery: the service's data directory on a small tmpfs of
its own, filled while a job trains, then given room back.

Mounting a tmpfs needs root (CI runs as root); elsewhere the test is skipped, saying why.
"""

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    ADMIN_PASSWORD,
    Server,
    free_port,
    login_over_http,
    prepare_data_dir,
    qa_pairs,
    service_env,
    wait_for_status,
)

pytestmark = pytest.mark.slow
DISK_MB = 160
LOW_MB = 96  # QATUNE_DISK_LOW_MB: a paused job goes on once this much is free
MB = 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(path: Path, *, leave_mb: float = 0) -> None:
    """Write `path` until the disk has only `leave_mb` free (0: until a write fails)."""
    with path.open("wb") as handle:
        for size in (MB, 4096, 1):
            while os.statvfs(path).f_bavail * os.statvfs(path).f_frsize > leave_mb * MB + size:
                try:
                    handle.write(b"\0" * size)
                    handle.flush()
                except OSError:
                    break
            if leave_mb:
                return


def entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def event_messages(client: httpx.Client, job_id: int) -> list[str]:
    page = client.get(f"/jobs/{job_id}/logs", params={"limit": 1000}).json()
    return [event["message"] for event in page["events"]]


def test_a_full_disk_pauses_the_job_refuses_writes_with_507_and_all_goes_on_with_room(
    small_disk: Path, tmp_path: Path, model_cache: Path
) -> None:
    prepare_data_dir(small_disk, model_cache)  # the built-in model stays off the small disk
    outside = tmp_path / "outside"  # the server's own output, readable whatever happens
    outside.mkdir()
    env = service_env(
        small_disk, QATUNE_LOG_DIR=str(outside / "logs"), QATUNE_DISK_LOW_MB=str(LOW_MB)
    )
    server = Server(f"http://127.0.0.1:{free_port()}", outside, env)
    server.start()
    try:
        _run_the_scenario(server, small_disk)
    finally:
        server.stop()


def _run_the_scenario(server: Server, disk: Path) -> None:
    client = server.client(login_over_http(server, "admin", ADMIN_PASSWORD))
    ready = client.get("/ready")
    assert ready.status_code == 200 and ready.json()["disk"] == "ok", ready.text
    job_id = client.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:8], "hyperparameters": {"epochs": 40}}
    ).json()["id"]
    deadline = time.monotonic() + 240
    while not client.get(f"/jobs/{job_id}").json()["checkpoint_step"]:
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.3)

    filler = disk / "filler"
    fill(filler)
    free_mb = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize / MB
    print(f"disk filled: {free_mb:.2f} MB free")

    # Every write fails for space: a 507 that says so, on both APIs, and nothing left over.
    jobs_before, datasets_before = entries(disk / "jobs"), entries(disk / "datasets")
    upload = client.post(
        "/datasets", files={"file": ("qa.jsonl", "\n".join(json.dumps(p) for p in qa_pairs()))}
    )
    assert upload.status_code == 507, upload.text
    assert "disk holding qatune's data is full" in upload.json()["detail"]
    created = client.post("/jobs", json={"qa_pairs": qa_pairs()[:4]})
    assert created.status_code == 507, created.text
    file = client.post(
        "/v1/files",
        files={"file": ("chat.jsonl", json.dumps(_chat(qa_pairs()[0])))},
        data={"purpose": "fine-tune"},
    )
    assert file.status_code == 507 and "full" in file.json()["error"]["message"], file.text
    assert entries(disk / "jobs") == jobs_before and entries(disk / "datasets") == datasets_before
    ready = client.get("/ready")
    assert ready.status_code == 503 and ready.json()["disk"].startswith("full"), ready.text
    assert "qatune_disk_state 2.0" in client.get("/metrics").text

    # The running job cannot save its next checkpoint: it stops, and once a little room
    # is back (under the threshold), it is recorded as paused for the disk, not failed.
    deadline = time.monotonic() + 240
    while f"job {job_id} stopped, the disk is full" not in server.output():
        assert time.monotonic() < deadline, server.output()[-3000:]
        time.sleep(0.5)
    # Its end cannot be written yet: it still reads running, and says it waits for disk.
    waiting = client.get(f"/jobs/{job_id}").json()
    assert (waiting["status"], waiting["waiting_for_disk"]) == ("running", True), waiting
    listed = client.get("/jobs").json()["items"]
    assert [j["waiting_for_disk"] for j in listed if j["id"] == job_id] == [True]
    filler.unlink()
    fill(filler, leave_mb=(LOW_MB + 32) / 2)  # full no more, still low
    paused = wait_for_status(client, job_id, {"paused", "failed", "succeeded"}, timeout=60)
    assert paused["status"] == "paused" and paused["waiting_for_disk"], paused
    assert paused["failures"] == 0
    assert any(m.startswith("Paused: the disk holding") for m in event_messages(client, job_id))
    ready = client.get("/ready")
    assert ready.status_code == 200 and ready.json()["disk"].startswith("low"), ready.text
    time.sleep(3)  # low is not room enough: it waits
    assert client.get(f"/jobs/{job_id}").json()["status"] == "paused"

    # Room again: it goes on by itself from its checkpoint, and succeeds.
    filler.unlink()
    final = wait_for_status(client, job_id, {"succeeded", "failed"}, timeout=600)
    assert final["status"] == "succeeded", final["error"]
    assert final["failures"] == 0 and not final["waiting_for_disk"]
    messages = event_messages(client, job_id)
    assert any("the disk has room again" in m for m in messages), messages
    history = client.get(f"/jobs/{job_id}/logs", params={"limit": 1000}).json()["events"]
    resumed = [e["data"]["step"] for e in history if e["data"].get("kind") == "resumed"]
    assert resumed and resumed[0] == paused["checkpoint_step"], (resumed, paused)
    assert client.get("/ready").json()["disk"] == "ok"
    print(
        f"paused at checkpoint {paused['checkpoint_step']}, resumed from {resumed[0]}, "
        f"succeeded in {final['attempts']} runs with 0 failures"
    )


def _chat(pair: dict[str, Any]) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": pair["question"]},
            {"role": "assistant", "content": pair["answer"]},
        ]
    }
