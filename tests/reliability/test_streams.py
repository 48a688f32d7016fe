"""Floods of live log streams against a real server while a job trains."""

import asyncio
import multiprocessing
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


def hold_streams(
    url: str, headers: dict[str, str], job_id: int, ready: object, stop: object
) -> None:
    """In a process of its own, so that reading 200 streams does not delay the probes."""

    async def main() -> list[int]:
        limits = httpx.Limits(max_connections=STREAMS + 10)
        async with httpx.AsyncClient(
            base_url=url, headers=headers, limits=limits, timeout=60
        ) as api:
            received = [0] * STREAMS
            opened = asyncio.Semaphore(0)

            async def follow(index: int) -> None:
                async with api.stream("GET", f"/jobs/{job_id}/logs/stream") as stream:
                    assert stream.status_code == 200, stream.status_code
                    opened.release()
                    async for line in stream.aiter_lines():
                        received[index] += line.startswith("event: log")

            tasks = [asyncio.create_task(follow(i)) for i in range(STREAMS)]
            for _ in range(STREAMS):
                await asyncio.wait_for(opened.acquire(), timeout=60)
            ready.set()  # type: ignore[attr-defined]
            while not stop.is_set():  # type: ignore[attr-defined]
                await asyncio.sleep(0.1)
            for task in tasks:
                task.cancel()
            return received

    received = asyncio.run(main())
    assert min(received) > 0, "a stream got no event"


@pytest.mark.serial  # a latency bound: another test's load beside it would be measured too
def test_200_streams_while_a_job_trains_leave_the_api_responsive(
    make_server: Callable[..., Server],
) -> None:
    # 200 clients, here all from one address: no cap on connections per address.
    server = make_server(
        QATUNE_MAX_STREAMS_PER_USER=str(STREAMS + 10), QATUNE_MAX_CONNECTIONS_PER_SOURCE="0"
    )
    headers = {"Authorization": f"Bearer {token(server)}"}
    api = httpx.Client(base_url=server.url, headers=headers, timeout=60)
    job = api.post("/jobs", json={"qa_pairs": qa_pairs(), "hyperparameters": {"epochs": 100}})
    job_id = job.json()["id"]
    deadline = time.monotonic() + 120
    while api.get(f"/jobs/{job_id}").json()["progress"]["step"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.3)

    context = multiprocessing.get_context("spawn")
    ready, stop = context.Event(), context.Event()
    holder = context.Process(
        target=hold_streams, args=(server.url, headers, job_id, ready, stop), daemon=True
    )
    holder.start()
    assert ready.wait(90), "the streams did not open"
    step_before = api.get(f"/jobs/{job_id}").json()["progress"]["step"]
    latencies: dict[str, list[float]] = {"/health": [], "/jobs": []}
    for _ in range(200):  # (with 100, p99 is the second-slowest probe: one hiccup decides)
        for path in latencies:
            started = time.perf_counter()
            assert api.get(path).status_code == 200
            latencies[path].append(time.perf_counter() - started)
        time.sleep(0.05)
    step_after = api.get(f"/jobs/{job_id}").json()["progress"]["step"]
    stop.set()
    holder.join(60)
    api.post(f"/jobs/{job_id}/cancel")
    assert holder.exitcode == 0  # every stream got the job's events
    assert step_after > step_before  # training went on
    p50 = {path: statistics.median(values) for path, values in latencies.items()}
    p99 = {path: statistics.quantiles(values, n=100)[98] for path, values in latencies.items()}
    print(f"\np50 {p50}, p99 {p99} with {STREAMS} streams open while training")
    # A blocked event loop shows as whole seconds, and in every probe behind it. The bounds
    # leave room for a 2-core machine's scheduling, which the job and the 200 readers share
    # with the server: p99 has been 8-150 ms here, and 300 ms on a busier machine of the
    # same size; a loop blocked for a training step would put p50 itself past them.
    assert p50["/health"] < 0.05 and p50["/jobs"] < 0.05, p50
    assert p99["/health"] < 0.5 and p99["/jobs"] < 0.5, p99


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


def test_the_stream_cap_is_exact_under_a_burst_and_every_place_comes_back(
    make_server: Callable[..., Server],
) -> None:
    """
    70 streams opened at once by one user against a cap of 20: exactly 20 open. Once
        they are closed (and when a client leaves before reading a byte), the places return."""
    server = make_server(QATUNE_MAX_CONNECTIONS_PER_SOURCE="0")  # 70 clients, one address
    headers = {"Authorization": f"Bearer {token(server)}"}
    api = httpx.Client(base_url=server.url, headers=headers, timeout=60)
    job_id = api.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:4], "hyperparameters": {"epochs": 100}}
    ).json()["id"]

    async def burst(count: int, read: bool) -> list[int | str]:
        """Each request's status; "ended" for a stream that had ended while held."""
        limits = httpx.Limits(max_connections=count + 5)
        async with httpx.AsyncClient(
            base_url=server.url, headers=headers, limits=limits, timeout=60
        ) as client:
            opened = asyncio.Event()

            async def one() -> int | str:
                async with client.stream("GET", f"/jobs/{job_id}/logs/stream") as stream:
                    if stream.status_code == 200 and read:
                        lines = stream.aiter_lines()
                        await anext(lines)
                        await opened.wait()  # hold it until every request is answered
                        try:  # still open? (a stream that ended gave its place back)
                            line = await asyncio.wait_for(anext(lines), 0.5)
                        except TimeoutError:
                            return 200
                        except (StopAsyncIteration, httpx.HTTPError):
                            return "ended"
                        return "ended" if line.startswith("event: end") else 200
                    return stream.status_code

            answers = asyncio.gather(*(one() for _ in range(count)))
            await asyncio.sleep(3)
            opened.set()
            return list(await answers)

    statuses = asyncio.run(burst(70, read=True))
    # Exactly 20 held at the end; none may have ended while held (that would free a place).
    assert statuses.count(200) == 20 and statuses.count(429) == 50, statuses
    asyncio.run(burst(20, read=False))  # 20 clients that leave before reading anything
    time.sleep(1)
    again = asyncio.run(burst(20, read=True))
    assert again == [200] * 20, again  # every place came back
    api.post(f"/jobs/{job_id}/cancel")
