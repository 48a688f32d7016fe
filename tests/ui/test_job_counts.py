"""The job page's counts, in a real Chromium. With question noise, while it trains, the
share learned with words dropped and the share answered as written, side by side; after
the final count, which is of the questions as written, that one alone. Once finished, what
it kept of what the base knew, as served and by the adapter alone (as exports answer).

The events go into the server's own SQLite file through the worker's own recording path
(app/services/jobs/runs.py), as a training child's would: the page reads them live."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.language import said
from app.db.session import Database
from app.jobs.outcomes import Succeeded
from app.ml.events import Learned, TrainingEvent
from app.services.jobs import runs as job_runs
from tests.conftest import Server, login_over_http, qa_pairs
from tests.services.test_jobs import METRICS, RESOLVED
from tests.ui.conftest import CHROMIUM, signed_in_page

pytestmark = [pytest.mark.ui]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (scripts/test.sh installs it)", allow_module_level=True
    )

from playwright.sync_api import Browser, expect  # noqa: E402


def job_without_a_worker(
    make_server: Callable[..., Server],
) -> tuple[Server, dict[str, str], int, Database]:
    """A server with no worker, the admin's headers, one job on it, and its database: the
    job's events and ending are the test's, written through the worker's own path."""
    server = make_server(QATUNE_EMBEDDED_WORKER="false")
    admin = login_over_http(server)
    job_id = int(server.client(admin).post("/jobs", json={"qa_pairs": qa_pairs()[:5]}).json()["id"])
    return server, admin, job_id, Database(f"sqlite:///{server.data_dir / 'qatune.db'}")


def test_with_question_noise_the_page_shows_the_count_as_written_until_the_end(
    browser: Browser, make_server: Callable[..., Server]
) -> None:
    server, admin, job_id, database = job_without_a_worker(make_server)

    def record(learned: Learned) -> None:
        with database.session() as session:
            job_runs.record_events(
                session, job_id=job_id, events=[TrainingEvent("INFO", said("epoch"), learned)]
            )

    record(Learned(epoch=9, learned=5, examples=5, token_accuracy=1.0, settling=False, written=4))
    page = signed_in_page(browser, server, admin)
    page.goto(f"{server.url}/#/jobs/{job_id}")
    expect(page.locator(".stats")).to_contain_text("Answered as written")
    expect(page.locator("#stat-learned-written")).to_have_text("80.0%")

    record(Learned(epoch=12, learned=5, examples=5, token_accuracy=1.0, settling=True, final=True))
    page.reload()
    expect(page.locator("#stat-learned-written")).to_have_count(0)
    expect(page.locator(".stats")).to_contain_text("Training answers learned100.0%")
    database.engine.dispose()


def test_a_finished_job_shows_what_it_kept_served_and_by_the_adapter_alone(
    browser: Browser, make_server: Callable[..., Server]
) -> None:
    server, admin, job_id, database = job_without_a_worker(make_server)
    with database.session() as session:
        assert job_runs.claim_next_job(session, worker_id="test:1") == job_id
    measured = replace(METRICS, knowledge_known=17, knowledge_kept=17, knowledge_alone=6)
    with database.session() as session:
        job_runs.settle(
            session, job_id=job_id, outcome=Succeeded(measured, RESOLVED), max_failures=2
        )
    page = signed_in_page(browser, server, admin)
    page.goto(f"{server.url}/#/jobs/{job_id}")
    expect(page.locator("#stat-kept")).to_contain_text("17 / 17")
    expect(page.locator("#stat-kept-alone")).to_contain_text("6 / 17")
    expect(page.locator(".stats")).to_contain_text("Kept by the adapter alone, as exports answer")
    database.engine.dispose()
