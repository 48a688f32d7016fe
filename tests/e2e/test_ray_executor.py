"""QATUNE_EXECUTOR=ray against a real local Ray cluster: a head that trains nothing and two
worker nodes with one qatune_slot each, started here as separate raylet processes.

The nodes have their own data directory (their model cache) and no access to the API's
database or storage: jobs, events, checkpoints and adapters travel through Ray.
"""

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_operations import samples
from tests.conftest import (
    Server,
    free_port,
    login_over_http,
    prepare_data_dir,
    qa_pairs,
    wait_for_status,
)

ray = pytest.importorskip("ray", reason="Ray is an extra: pip install -e '.[ray]'")
from ray.cluster_utils import Cluster  # noqa: E402

# One cluster at a time on this machine: the suite's two workers run these on one.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Iterator[Cluster]:
    """One cluster for the file's tests (starting one is seconds of both cores); each test
    gets its two worker nodes (`nodes`), a node a test killed replaced first."""
    node_data = tmp_path_factory.mktemp("node-data")  # the nodes' QATUNE_DATA_DIR, not the API's
    prepare_data_dir(node_data, model_cache)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("QATUNE_DATA_DIR", str(node_data))  # raylets pass it to their workers
        env.setenv("QATUNE_OFFLINE", "true")
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
        )
        yield cluster
        cluster.shutdown()


@pytest.fixture
def nodes(cluster: Cluster) -> Cluster:
    """Two worker nodes with one qatune_slot each."""
    while len(cluster.worker_nodes) < 2:
        cluster.add_node(num_cpus=1, resources={"qatune_slot": 1})
    cluster.wait_for_nodes()
    return cluster


@pytest.fixture
def ray_server(make_server: Callable[..., Server], nodes: Cluster) -> Server:
    server = make_server(QATUNE_EXECUTOR="ray", QATUNE_RAY_ADDRESS=nodes.address)
    ready = wait_for_ready(server.client(login_over_http(server)))
    assert ready.json()["executor"] == "ok", ready.text
    return server


def wait_for_ready(api: httpx.Client, timeout: float = 30) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while (ready := api.get("/ready")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.3)
    return ready


def events(api: httpx.Client, job_id: int) -> list[dict[str, Any]]:
    got = api.get(f"/jobs/{job_id}/logs", params={"limit": 1000})
    assert got.status_code == 200, got.text
    found: list[dict[str, Any]] = got.json()["events"]
    return found


def nodes_used(api: httpx.Client, job_id: int) -> list[str]:
    return [
        e["data"]["values"]["node_id"]
        for e in events(api, job_id)
        if (e.get("data") or {}).get("topic") == "ray_node"
    ]


def of_kind(api: httpx.Client, job_id: int, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events(api, job_id) if (e.get("data") or {}).get("kind") == kind]


def most_at_once(jobs: list[dict[str, Any]]) -> int:
    spans = [
        (datetime.fromisoformat(j["started_at"]), datetime.fromisoformat(j["finished_at"]))
        for j in jobs
    ]
    return max(sum(start <= at < end for start, end in spans) for at, _ in spans)


def test_four_jobs_run_two_at_a_time_on_two_nodes(ray_server: Server) -> None:
    api = ray_server.client(login_over_http(ray_server))
    assert samples(api.get("/metrics").text)[("qatune_executor_slots", ())] == 2
    pairs = qa_pairs()[:4]
    ids = [
        api.post(
            "/jobs", json={"qa_pairs": pairs, "name": f"ray-{n}", "hyperparameters": {"epochs": 3}}
        ).json()["id"]
        for n in range(4)  # enough for both slots to be busy at once, twice over
    ]
    jobs = [wait_for_status(api, job_id, {"succeeded", "failed", "cancelled"}) for job_id in ids]

    assert [job["status"] for job in jobs] == ["succeeded"] * 4, [j["error"] for j in jobs]
    assert [job["attempts"] for job in jobs] == [1] * 4  # none ran twice
    assert most_at_once(jobs) == 2  # both slots used, never a third run
    used = {node for job_id in ids for node in nodes_used(api, job_id)}
    assert len(used) == 2
    for job_id in ids:
        seqs = [e["seq"] for e in events(api, job_id)]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        steps = [data["step"] for data in of_kind(api, job_id, "progress")]
        assert steps == sorted(steps) and steps, steps
        assert [e["message"] for e in events(api, job_id)][-1] == "Job succeeded"
    # The adapter came back to the API's storage: the API serves it.
    asked = api.post(f"/jobs/{ids[0]}/query", json={"question": pairs[0]["question"]})
    assert asked.status_code == 200, asked.text


def test_a_node_killed_mid_job_resumes_elsewhere_and_cancel_frees_the_slot(
    ray_server: Server, nodes: Cluster
) -> None:
    api = ray_server.client(login_over_http(ray_server))
    pairs = qa_pairs()[:10]
    long_job = {"qa_pairs": pairs, "hyperparameters": {"epochs": 60, "batch_size": 1}}
    job_id = api.post("/jobs", json=long_job).json()["id"]
    job = wait_until(api, job_id, lambda j: (j["checkpoint_step"] or 0) > 0)
    (first_node,) = nodes_used(api, job_id)
    dying = next(node for node in nodes.list_all_nodes() if node.node_id == first_node)
    nodes.remove_node(dying, allow_graceful=False)  # its raylet and workers are killed

    wait_until(api, job_id, lambda j: bool(of_kind(api, j["id"], "resumed")))
    assert api.get(f"/jobs/{job_id}").json()["attempts"] == 2
    assert nodes_used(api, job_id)[1] != first_node
    messages = [e["message"] for e in events(api, job_id)]
    assert any(m.startswith("Re-queued") for m in messages), messages
    (resumed,) = of_kind(api, job_id, "resumed")
    assert resumed["step"] >= job["checkpoint_step"]

    cancelled_at = time.monotonic()
    assert api.post(f"/jobs/{job_id}/cancel").status_code == 200
    done = wait_for_status(api, job_id, {"cancelled", "succeeded", "failed"}, timeout=30)
    assert done["status"] == "cancelled"
    assert time.monotonic() - cancelled_at < 10  # the run heard it: no kill was needed
    # The one slot left is free again: the next job runs and succeeds.
    next_id = api.post(
        "/jobs", json={"qa_pairs": pairs[:4], "hyperparameters": {"epochs": 2}}
    ).json()["id"]
    assert (
        wait_for_status(api, next_id, {"succeeded", "failed"}, timeout=120)["status"] == "succeeded"
    )


def test_an_unreachable_cluster_is_not_ready_and_jobs_wait(
    make_server: Callable[..., Server],
) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    server = make_server(QATUNE_EXECUTOR="ray", QATUNE_RAY_ADDRESS=nobody)
    api = server.client(login_over_http(server))
    job = api.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}).json()
    time.sleep(5)  # the worker has tried to connect
    ready = wait_for_ready(api, timeout=0)
    assert ready.status_code == 503
    assert ready.json()["executor"].startswith(f"ray: unreachable at {nobody}"), ready.text
    assert api.get(f"/jobs/{job['id']}").json()["status"] == "queued"
    assert api.get("/health").status_code == 200


def wait_until(
    api: httpx.Client, job_id: int, ready: Callable[[dict[str, Any]], bool], timeout: float = 120
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = api.get(f"/jobs/{job_id}").json()
        assert job["status"] in ("queued", "running"), job
        if ready(job):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id}: condition not met in {timeout}s: {job}")
