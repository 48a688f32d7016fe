"""A job's log and a failed job's error read in the language the reader asks for: each is
kept as a sentence (template and values) and put in the reader's language when shown, in
the native API, the live stream and /v1; the stored message stays English."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.language import said
from app.db.models import JobEvent
from app.jobs.outcomes import Failed
from app.main import create_app
from app.runtime import Runtime
from app.services.jobs import runs as job_runs
from tests.api.test_error_words import CHINESE, HAN, english_left
from tests.conftest import ADMIN_PASSWORD, login, make_user, qa_pairs


@pytest.fixture
def served(app_env: Path) -> Iterator[tuple[TestClient, Runtime]]:
    runtime = Runtime(Settings())
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        yield client, runtime


def test_a_jobs_log_reads_in_the_language_asked(served: tuple[TestClient, Runtime]) -> None:
    client, runtime = served
    alice = make_user(client, login(client, "admin", ADMIN_PASSWORD), "alice")
    job_id = client.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}, headers=alice).json()["id"]
    for action in ("pause", "resume", "cancel"):
        assert client.post(f"/jobs/{job_id}/{action}", headers=alice).status_code == 200

    english = [
        e["message"] for e in client.get(f"/jobs/{job_id}/logs", headers=alice).json()["events"]
    ]
    assert english == [
        "Job queued: 4 QA pairs on builtin:tiny",
        "Paused before it started; resume it to queue it again",
        "Resumed: queued to continue from the start",
        "Cancelled while queued",
    ]
    chinese_headers = {**alice, **CHINESE}
    chinese = [
        e["message"]
        for e in client.get(f"/jobs/{job_id}/logs", headers=chinese_headers).json()["events"]
    ]
    assert chinese[0] == "任务已排队：4 个问答对，基于 builtin:tiny"
    assert all(HAN.search(m) and not english_left(m, "builtin:tiny") for m in chinese), chinese
    with client.stream("GET", f"/jobs/{job_id}/logs/stream", headers=chinese_headers) as stream:
        streamed = "".join(stream.iter_text())
    assert all(m in streamed for m in chinese), streamed

    with runtime.database.session() as session:  # the stored text stays English
        stored = session.query(JobEvent).filter_by(job_id=job_id).order_by(JobEvent.seq).all()
        assert [e.message for e in stored] == english


def test_a_failed_jobs_error_reads_in_the_language_asked(
    served: tuple[TestClient, Runtime],
) -> None:
    client, runtime = served
    alice = make_user(client, login(client, "admin", ADMIN_PASSWORD), "alice")
    job_id = client.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}, headers=alice).json()["id"]
    with runtime.database.session() as session:
        job_runs.claim_next_job(session, worker_id="test:1")
    reason = said("No example fits max_seq_length; raise max_seq_length")
    with runtime.database.session() as session:
        job_runs.settle(session, job_id=job_id, outcome=Failed(reason), max_failures=2)

    english = client.get(f"/jobs/{job_id}", headers=alice).json()
    assert english["error"] == "No example fits max_seq_length; raise max_seq_length"
    chinese = client.get(f"/jobs/{job_id}", headers={**alice, **CHINESE}).json()
    assert chinese["error"] == "没有样本能放进 max_seq_length；请调高 max_seq_length"
    last = client.get(f"/jobs/{job_id}/logs", headers={**alice, **CHINESE}).json()["events"][-1]
    assert last["message"] == "任务失败：没有样本能放进 max_seq_length；请调高 max_seq_length"

    chinese_v1 = client.get(f"/v1/fine_tuning/jobs/ftjob-{job_id}", headers={**alice, **CHINESE})
    assert chinese_v1.json()["error"]["message"] == chinese["error"]
    events = client.get(
        f"/v1/fine_tuning/jobs/ftjob-{job_id}/events", headers={**alice, **CHINESE}
    ).json()["data"]
    assert events[0]["message"] == last["message"]  # newest first
