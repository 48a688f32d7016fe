"""Memory goes back between jobs: the API process must not grow over a run of jobs."""

import psutil
import pytest

from tests.conftest import Server, qa_pairs, wait_for_status
from tests.e2e.test_service import signed_in

pytestmark = pytest.mark.slow
JOBS = 6
ALLOWED_GROWTH_MB = 50


def test_api_rss_stays_flat_over_a_run_of_jobs(server: Server) -> None:
    api = signed_in(server)
    assert server.process is not None
    process = psutil.Process(server.process.pid)
    rss: list[float] = []
    for _ in range(JOBS):
        job = api.post(
            "/jobs", json={"qa_pairs": qa_pairs()[:8], "hyperparameters": {"max_steps": 2}}
        ).json()
        assert wait_for_status(api, job["id"], {"succeeded", "failed"})["status"] == "succeeded"
        rss.append(process.memory_info().rss / 2**20)
    growth = rss[-1] - rss[0]
    print(f"\nAPI RSS after each job (MB): {[round(r) for r in rss]}; growth {growth:+.1f} MB")
    assert growth <= ALLOWED_GROWTH_MB, rss
    events = api.get(f"/jobs/{job['id']}/logs?limit=1000").json()["events"]
    cleanup = [e["data"] for e in events if e["data"].get("kind") == "worker_memory"]
    assert [c["when"] for c in cleanup] == ["before", "after"]
    assert all("rss_mb" in c["before"] and "rss_mb" in c["after"] for c in cleanup)
