"""What an operator's Prometheus sees of a live server that trains and answers."""

from collections.abc import Callable

import pytest

from tests.api.test_operations import SCRAPE_TOKEN, samples
from tests.conftest import Server, login_over_http, qa_pairs, wait_for_status

pytestmark = pytest.mark.slow


def test_a_scrape_shows_the_job_the_worker_and_the_answers(
    make_server: Callable[..., Server],
) -> None:
    server = make_server(QATUNE_METRICS_TOKEN=SCRAPE_TOKEN)
    scraper = server.client({"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    assert scraper.get("/ready").json() == {
        "status": "ready",
        "database": "ok",
        "worker": "ok",
        "executor": "ok",
        "disk": "ok",
    }
    api = server.client(login_over_http(server))
    pairs = qa_pairs()[:4]
    job = api.post("/jobs", json={"qa_pairs": pairs, "hyperparameters": {"epochs": 2}}).json()
    assert wait_for_status(api, job["id"], {"succeeded", "failed"})["status"] == "succeeded"
    answered = api.post(f"/jobs/{job['id']}/query", json={"question": pairs[0]["question"]})
    assert answered.status_code == 200, answered.text

    got = samples(scraper.get("/metrics").text)
    assert got[("qatune_jobs", (("status", "succeeded"),))] == 1
    assert got[("qatune_queue_length", ())] == 0
    assert got[("qatune_job_queue_wait_seconds_count", ())] == 1
    assert got[("qatune_job_queue_wait_seconds_sum", ())] >= 0
    assert got[("qatune_embedded_worker_up", ())] == 1
    assert got[("qatune_executor_slots", ())] == 1
    engine = (("base_model", "builtin:tiny"),)
    assert got[("qatune_inference_requests_total", engine)] >= 1
    assert got[("qatune_inference_generated_tokens_total", engine)] >= len(pairs[0]["answer"]) // 2
    assert got[("qatune_inference_waiting", engine)] == 0
