"""GET /metrics and GET /ready, in process: who may read them, and what they say."""

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from tests.conftest import ADMIN_PASSWORD, login, make_user, qa_pairs

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

SCRAPE_TOKEN = "scrape-7Hq2LmV9xRt4WbN8cKp3ZsD6fYj1GaE5"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels): parsed as Prometheus parses it."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_are_for_admins_or_the_scrape_token(
    client: "TestClient", admin_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.get("/metrics").status_code == 401
    alice = make_user(client, admin_headers, "alice")
    assert client.get("/metrics", headers=alice).status_code == 403
    assert client.get("/ready", headers=alice).status_code == 403
    assert client.get("/metrics", headers=admin_headers).status_code == 200
    scraper = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}
    # No scrape token configured: a made-up one is just an invalid token.
    assert client.get("/metrics", headers=scraper).status_code == 401
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    monkeypatch.setattr(settings, "metrics_token", SecretStr(SCRAPE_TOKEN))
    assert client.get("/metrics", headers=scraper).status_code == 200
    assert client.get("/ready", headers=scraper).status_code == 200
    wrong = {"Authorization": f"Bearer {SCRAPE_TOKEN}x"}
    assert client.get("/metrics", headers=wrong).status_code == 401


def test_metrics_count_jobs_the_queue_and_requests_by_route(
    client: "TestClient", admin_headers: dict[str, str]
) -> None:
    for _ in range(2):  # no worker in this app: they stay queued
        created = client.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}, headers=admin_headers)
        assert created.status_code == 201, created.text
    assert client.get("/jobs/999999", headers=admin_headers).status_code == 404
    assert client.get("/no/such/path/42", headers=admin_headers).status_code == 404

    response = client.get("/metrics", headers=admin_headers)
    assert response.headers["content-type"].startswith("text/plain; version=")
    got = samples(response.text)
    assert got[("qatune_jobs", (("status", "queued"),))] == 2
    assert got[("qatune_jobs", (("status", "succeeded"),))] == 0
    assert got[("qatune_queue_length", ())] == 2
    assert got[("qatune_queue_oldest_wait_seconds", ())] >= 0
    assert got[("qatune_job_queue_wait_seconds_count", ())] == 0
    assert got[("qatune_embedded_worker_up", ())] == 0
    assert got[("qatune_executor_slots", ())] == 0
    assert 0 < got[("qatune_disk_free_bytes", ())] <= got[("qatune_disk_total_bytes", ())]
    assert got[("qatune_disk_low_threshold_bytes", ())] == 1024 * 1024 * 1024
    routes = {dict(labels).get("route") for name, labels in got if name.startswith("qatune_http")}
    assert {"/jobs", "/jobs/{job_id:int}", "unmatched"} <= routes
    assert not any(route and "999999" in route for route in routes)  # templates, not paths
    jobs_posts = got[
        ("qatune_http_request_duration_seconds_count",
         (("method", "POST"), ("route", "/jobs"), ("status", "201")))
    ]  # fmt: skip
    assert jobs_posts == 2


def test_ready_says_what_is_up(client: "TestClient", admin_headers: dict[str, str]) -> None:
    ready = client.get("/ready", headers=admin_headers)
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "database": "ok",
        "worker": "external",
        "disk": "ok",
    }


def test_a_weak_scrape_token_is_refused_at_start() -> None:
    from pydantic import ValidationError

    from app.core.config import Settings

    with pytest.raises(ValidationError, match="QATUNE_METRICS_TOKEN is a placeholder"):
        Settings(metrics_token="changeme")


def test_the_vllm_backend_without_its_environment_is_a_503_that_says_what_to_do(
    app_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    monkeypatch.setenv("QATUNE_SERVING_BACKEND", "vllm")
    monkeypatch.setenv("QATUNE_VLLM_PYTHON", str(tmp_path / "no-such-env" / "python"))
    with TestClient(create_app(Settings())) as client:
        headers = login(client, "admin", ADMIN_PASSWORD)
        asked = client.post(
            "/v1/chat/completions",
            json={"model": "builtin:tiny", "messages": [{"role": "user", "content": "Hi"}]},
            headers=headers,
        )
        assert asked.status_code == 503, asked.text
        assert "make vllm" in asked.json()["error"]["message"]
        assert int(asked.headers["Retry-After"]) > 0
        assert client.get("/ready", headers=headers).status_code == 200  # nothing in use yet
