"""A queued job's place in the line, in a real Chromium: on the jobs list and the job's
page, kept current as the line moves. The line takes a turn per user in rotation, so the
admin's second job waits behind another user's first."""

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Server, login_over_http, make_user_over_http, qa_pairs
from tests.ui.conftest import CHROMIUM, signed_in_page

pytestmark = [pytest.mark.ui]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (scripts/test.sh installs it)", allow_module_level=True
    )

from playwright.sync_api import Browser, expect  # noqa: E402


def test_a_queued_job_shows_its_place_and_moves_up_as_the_line_does(
    browser: Browser, make_server: Callable[..., Server]
) -> None:
    server = make_server(QATUNE_EMBEDDED_WORKER="false")  # the jobs stay queued
    admin = login_over_http(server)
    carol = make_user_over_http(server, admin, "carol")

    def new_job(headers: dict[str, str]) -> int:
        made = server.client(headers).post("/jobs", json={"qa_pairs": qa_pairs()[:3]})
        assert made.status_code == 201, made.text
        return int(made.json()["id"])

    first, second = new_job(admin), new_job(admin)
    hers = new_job(carol)
    page = signed_in_page(browser, server, admin)
    page.goto(f"{server.url}/#/jobs")
    expect(page.locator(f'tr[data-job="{first}"]')).to_contain_text("next to run")
    expect(page.locator(f'tr[data-job="{hers}"]')).to_contain_text("1 queued ahead of it")
    expect(page.locator(f'tr[data-job="{second}"]')).to_contain_text("2 queued ahead of it")
    # and about when it starts: the two jobs before it as each was estimated, rounded
    starts = re.compile(r"2 queued ahead of it, starts in about (\d+m )?\d+0s")
    expect(page.locator(f'tr[data-job="{second}"]')).to_contain_text(starts)
    expect(page.locator(f'tr[data-job="{first}"]')).not_to_contain_text("starts in")

    page.goto(f"{server.url}/#/jobs/{second}")
    expect(page.locator("#progress-label")).to_contain_text("2 queued ahead of it")
    assert server.client(carol).post(f"/jobs/{hers}/cancel").status_code == 200
    expect(page.locator("#progress-label")).to_contain_text("1 queued ahead of it")
