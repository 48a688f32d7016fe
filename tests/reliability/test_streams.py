"""Floods of live log streams against a real server while a job trains."""

import asyncio
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, Server, qa_pairs

pytestmark = pytest.mark.slow
STREAMS = 200


def token(server: Server, username: str = "admin", password: str = ADMIN_PASSWORD) -> str:
    response = httpx.post(
        f"{server.url}/auth/token", data={"username": username, "password": password}
    )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


async def flood(server: Server) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {token(server)}"}
    limits = httpx.Limits(max_connections=STREAMS + 20, max_keepalive_connections=20)
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, limits=limits, timeout=30
    ) as api:
        job = (
            await api.post(
                "/jobs", json={"qa_pairs": qa_pairs(), "hyperparameters": {"epochs": 100}}
            )
        ).json()
        deadline = time.monotonic() + 120
        while (await api.get(f"/jobs/{job['id']}")).json()["progress"]["step"] < 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.3)

        stop = asyncio.Event()
        received = [0] * STREAMS
        opened = asyncio.Semaphore(0)

        async def follow(index: int) -> None:
            async with api.stream("GET", f"/jobs/{job['id']}/logs/stream") as stream:
                assert stream.status_code == 200
                opened.release()
                async for line in stream.aiter_lines():
                    if line.startswith("event: log"):
                        received[index] += 1
                    if stop.is_set():
                        return

        streams = [asyncio.create_task(follow(i)) for i in range(STREAMS)]
        for _ in range(STREAMS):
            await asyncio.wait_for(opened.acquire(), timeout=60)
        step_before = (await api.get(f"/jobs/{job['id']}")).json()["progress"]["step"]
        latencies: dict[str, list[float]] = {"/health": [], "/jobs": []}
        for _ in range(60):
            for path in latencies:
                started = time.perf_counter()
                assert (await api.get(path)).status_code == 200
                latencies[path].append(time.perf_counter() - started)
            await asyncio.sleep(0.05)
        step_after = (await api.get(f"/jobs/{job['id']}")).json()["progress"]["step"]
        stop.set()
        await api.post(f"/jobs/{job['id']}/cancel")
        await asyncio.wait_for(asyncio.gather(*streams, return_exceptions=True), timeout=60)
        assert min(received) > 0  # every stream got the job's events
        assert step_after > step_before  # training went on
        return {
            path: statistics.quantiles(values, n=100)[98] for path, values in latencies.items()
        }


def test_200_streams_while_a_job_trains_leave_the_api_responsive(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(QATUNE_MAX_STREAMS_PER_USER=str(STREAMS + 10))
    p99 = asyncio.run(flood(server))
    print(f"\np99 with {STREAMS} streams open while training: {p99}")
    assert p99["/health"] < 0.1 and p99["/jobs"] < 0.1, p99


def test_a_user_with_too_many_streams_gets_a_429(server: Server) -> None:
    api = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token(server)}"}, timeout=60
    )
    job = api.post("/jobs", json={"qa_pairs": qa_pairs()[:4], "hyperparameters": {"epochs": 100}})
    job_id = job.json()["id"]
    with (
        httpx.Client(base_url=server.url, headers=api.headers, timeout=30) as raw,
        ExitStack() as streams,
    ):
        readers = []  # a dropped line iterator would close its stream
        for _ in range(20):
            stream = streams.enter_context(raw.stream("GET", f"/jobs/{job_id}/logs/stream"))
            assert stream.status_code == 200
            readers.append(stream.iter_lines())
            assert next(readers[-1]) == "retry: 2000"
        refused = api.get(f"/jobs/{job_id}/logs/stream")
        assert refused.status_code == 429 and refused.headers["Retry-After"]
        assert "log streams open" in refused.json()["detail"]
    api.post(f"/jobs/{job_id}/cancel")
