"""Kill everything that can die, at random moments: no job is lost, stuck, or run twice."""

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil
import pytest

from tests.conftest import ADMIN_PASSWORD, ROOT, Server, qa_pairs, wait_for_status

pytestmark = pytest.mark.slow
# The suite's share of the kills; the figures in docs/reliability.md come from
# QATUNE_TEST_KILLS=10 (each kill is a restart, ~25 s of the suite's time).
KILLS = int(os.environ.get("QATUNE_TEST_KILLS", "4"))  # of the whole service, at random moments
CHILD_KILLS = 3  # of the training child alone
JOBS = 4  # through two workers at once


def api(server: Server) -> httpx.Client:
    token = httpx.post(
        f"{server.url}/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD}
    ).json()["access_token"]
    return server.client({"Authorization": f"Bearer {token}"})


def events(client: httpx.Client, job_id: int) -> list[dict[str, Any]]:
    page = client.get(f"/jobs/{job_id}/logs", params={"limit": 1000}).json()
    return list(page["events"])


def check_resumed_from_checkpoints(history: list[dict[str, Any]]) -> int:
    """Every run that started after a checkpoint was saved resumed from it (or a newer one):
    none started again from step 0. Returns how many runs resumed."""
    kinds = [(e["data"].get("kind"), e["data"].get("step")) for e in history]
    last_checkpoint, resumes = 0, 0
    for index, (kind, step) in enumerate(kinds):
        if kind == "checkpoint":
            last_checkpoint = step
        elif kind == "start" and last_checkpoint:
            first = next(k for k in kinds[index + 1 :] if k[0] in ("resumed", "progress"))
            assert first[0] == "resumed" and first[1] >= last_checkpoint, (first, last_checkpoint)
            resumes += 1
    return resumes


def wait_for_new_checkpoint(client: httpx.Client, ids: list[int], timeout: float) -> None:
    """Until the running job saves a checkpoint after this call (or none is running)."""

    def newest() -> dict[int, tuple[str, int | None]]:
        jobs = [client.get(f"/jobs/{i}").json() for i in ids]
        return {job["id"]: (job["status"], job["checkpoint_step"]) for job in jobs}

    before, deadline = newest(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = newest()
        if all(status in ("succeeded", "failed", "cancelled") for status, _ in now.values()):
            return
        if any(now[i][1] != before[i][1] and now[i][1] is not None for i in ids):
            return
        time.sleep(0.2)


def test_the_service_killed_at_random_loses_no_job(
    make_server: Callable[..., Server],
) -> None:
    rng = random.Random(20261122)
    server = make_server()
    client = api(server)
    ids = [
        client.post(
            "/jobs",
            # 10 pairs x 10 epochs a kill = 20 steps a kill in each job: long enough that the
            # kills land mid-training on an unloaded machine too (3 jobs for
            # QATUNE_TEST_KILLS=10).
            json={
                "qa_pairs": qa_pairs()[i * 10 : i * 10 + 10],
                "hyperparameters": {"epochs": min(80, 10 * KILLS)},
            },
        ).json()["id"]
        for i in range(2 if KILLS <= 4 else 3)
    ]
    kills = []
    for kill in range(KILLS):
        if kill % 2:
            time.sleep(rng.uniform(1.0, 10.0))
        else:  # every other kill waits for a new checkpoint, however slow the machine is
            wait_for_new_checkpoint(client, ids, timeout=120)
            time.sleep(rng.uniform(0.0, 2.0))
        statuses = [client.get(f"/jobs/{i}").json()["status"] for i in ids]
        kills.append(statuses)
        server.kill()  # SIGKILL: no cleanup; the training child dies with it
        server.start()
        client = api(server)
    total_resumes: list[int] = []
    for job_id in ids:
        final = wait_for_status(client, job_id, {"succeeded", "failed", "cancelled"}, timeout=600)
        assert final["status"] == "succeeded", final["error"]
        assert final["failures"] == 0  # restarts of the service are not the job's failures
        history = events(client, job_id)
        steps = [e["data"]["step"] for e in history if e["data"].get("kind") == "progress"]
        assert steps[-1] == final["progress"]["total_steps"]
        # Each run after the first: a kill found the job running, and the restarted service
        # queued it again, saying why.
        requeued = [e for e in history if "Re-queued (its worker process died)" in e["message"]]
        assert len(requeued) == final["attempts"] - 1
        resumed = check_resumed_from_checkpoints(history)
        total_resumes.append(resumed)
        print(f"job {job_id}: {final['attempts']} runs, {resumed} resumed from a checkpoint")
    running_kills = sum("running" in statuses for statuses in kills)
    print(f"{KILLS} kills, {running_kills} while a job was training")
    assert running_kills >= KILLS // 2 and sum(total_resumes) >= min(3, KILLS // 2)


def children(server: Server) -> list[psutil.Process]:
    """The server's training children: forked by its fork server (Linux), or spawned."""
    assert server.process is not None
    found = []
    for process in psutil.Process(server.process.pid).children(recursive=True):
        command = " ".join(process.cmdline())
        forked = "forkserver" in command and "forkserver" in " ".join(process.parent().cmdline())
        if forked or "spawn_main" in command:
            found.append(process)
    return found


def test_a_killed_training_child_resumes_each_time(server: Server) -> None:
    client = api(server)
    job_id = client.post(
        "/jobs",
        # 120 steps: a checkpoint each 12 (a tenth) and at least 2 s apart, so the three kills
        # land well before the end
        json={"qa_pairs": qa_pairs()[:8], "hyperparameters": {"epochs": 30, "batch_size": 2}},
    ).json()["id"]
    seen_checkpoint = 0
    for _ in range(CHILD_KILLS):
        deadline = time.monotonic() + 120
        while True:
            job = client.get(f"/jobs/{job_id}").json()
            if job["status"] == "running" and (job["checkpoint_step"] or 0) > seen_checkpoint:
                break
            assert time.monotonic() < deadline and job["status"] in ("queued", "running"), job
            time.sleep(0.2)
        seen_checkpoint = job["checkpoint_step"]
        (child,) = children(server)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    final = wait_for_status(client, job_id, {"succeeded", "failed"}, timeout=300)
    assert final["status"] == "succeeded", final["error"]
    assert final["failures"] == 0 and final["attempts"] == CHILD_KILLS + 1
    history = events(client, job_id)
    killed = [e for e in history if "training process was killed (SIGKILL)" in e["message"]]
    assert len(killed) == CHILD_KILLS
    assert check_resumed_from_checkpoints(history) == CHILD_KILLS


def test_two_workers_share_a_queue_and_no_job_runs_twice(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(QATUNE_EMBEDDED_WORKER="false")
    client = api(server)
    ids = [
        client.post(
            "/jobs", json={"qa_pairs": qa_pairs()[:2], "hyperparameters": {"max_steps": 1}}
        ).json()["id"]
        for _ in range(JOBS)
    ]
    logs = [server.data_dir / f"worker{i}.log" for i in range(2)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker"],
            env={**server.env, "QATUNE_WORKER_POLL_SECONDS": "0.2"},
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        for log in logs
    ]
    try:
        for job_id in ids:
            final = wait_for_status(client, job_id, {"succeeded", "failed"}, timeout=900)
            assert final["status"] == "succeeded", final["error"]
            assert final["attempts"] == 1
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(60)
    for job_id in ids:
        starts = [e for e in events(client, job_id) if e["data"].get("kind") == "start"]
        assert len(starts) == 1, f"job {job_id} trained {len(starts)} times"
    ran = [
        set(re.findall(r"Job (\d+) starting in a training child", log.read_text())) for log in logs
    ]
    assert not ran[0] & ran[1] and len(ran[0] | ran[1]) == JOBS
    print(f"{JOBS} jobs through two workers, each once: {len(ran[0])} and {len(ran[1])}")
