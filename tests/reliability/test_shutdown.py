"""SIGTERM with log streams open: the service stops within its grace, every stream gets a
final event, the running job pauses at a checkpoint and resumes from it on restart."""

import json
import signal
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, Server, login_over_http, qa_pairs, wait_for_status

pytestmark = pytest.mark.slow
GRACE = 10  # seconds: QATUNE_SHUTDOWN_GRACE_SECONDS
STREAMS = 10


def follow(
    server: Server, headers: dict[str, str], job_id: int, ends: list[dict[str, str]]
) -> None:
    """Read the job's log stream to its end; keep the data of its `end` event."""
    url = f"{server.url}/jobs/{job_id}/logs/stream"
    with httpx.stream("GET", url, headers=headers, timeout=120) as response:
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "end":
                ends.append(json.loads(line.removeprefix("data: ")))


def test_sigterm_with_streams_open_stops_in_grace_and_the_job_resumes_from_its_checkpoint(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(QATUNE_SHUTDOWN_GRACE_SECONDS=str(GRACE))
    headers = login_over_http(server, "admin", ADMIN_PASSWORD)
    client = server.client(headers)
    job_id = client.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:8], "hyperparameters": {"epochs": 30}}
    ).json()["id"]
    wait_for_status(client, job_id, {"running"}, timeout=120)
    deadline = time.monotonic() + 120
    while not (client.get(f"/jobs/{job_id}").json()["progress"] or {}).get("step"):
        assert time.monotonic() < deadline, "the job made no step"
        time.sleep(0.2)

    ends: list[dict[str, str]] = []
    readers = [
        threading.Thread(target=follow, args=(server, headers, job_id, ends), daemon=True)
        for _ in range(STREAMS)
    ]
    for reader in readers:
        reader.start()
    time.sleep(1.0)  # every stream is open and waiting
    assert server.process is not None
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(GRACE + 20)
    took = time.monotonic() - started
    for reader in readers:
        reader.join(5)
    print(f"stopped {took:.1f} s after SIGTERM with {STREAMS} streams open")
    # uvicorn re-raises the signal once it has shut down cleanly (a supervisor sees why).
    assert server.process.returncode == -signal.SIGTERM, server.output()[-2000:]
    assert "Application shutdown complete" in server.output()
    assert took < GRACE, f"{took:.1f} s to stop, grace {GRACE} s"
    assert len(ends) == STREAMS and all("reconnect" in end.get("reason", "") for end in ends)

    server.start()
    client = server.client(login_over_http(server, "admin", ADMIN_PASSWORD))
    final = wait_for_status(client, job_id, {"succeeded", "failed"}, timeout=600)
    assert final["status"] == "succeeded", final["error"]
    assert final["failures"] == 0 and final["attempts"] == 2
    history = client.get(f"/jobs/{job_id}/logs", params={"limit": 1000}).json()["events"]
    kinds = [e["data"].get("kind") for e in history]
    second_run = [i for i, kind in enumerate(kinds) if kind == "start"][1]
    checkpoints = [
        e["data"]["step"] for e in history[:second_run] if e["data"].get("kind") == "checkpoint"
    ]
    resumed = history[kinds.index("resumed")]["data"]["step"]
    assert resumed == checkpoints[-1]  # it goes on from where it paused
