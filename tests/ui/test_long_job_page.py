"""A job page with 100,000 events, in a real Chromium: it opens at once, keeps its log and
charts bounded, pages the log back on demand, and stays responsive while events stream.

A job writes about one event a training second, so these are the events of a day-long
run, written into the server's own SQLite file as its worker writes them (bench/scale.py
measures the same page at 1,000, 10,000 and 100,000 events)."""

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.scale import last_seq, pad_events, padded_job
from tests.conftest import Server, login_over_http
from tests.ui.conftest import CHROMIUM, shot, signed_in_page

pytestmark = [pytest.mark.ui, pytest.mark.slow]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (scripts/test.sh installs it)", allow_module_level=True
    )

from playwright.sync_api import Browser, expect  # noqa: E402

EVENTS = 100_000


def test_a_job_with_100k_events_opens_at_once_and_streams_on(
    browser: Browser, make_server: Callable[..., Server]
) -> None:
    server = make_server(QATUNE_EMBEDDED_WORKER="false")  # the job stays as padded
    admin = login_over_http(server)
    client = server.client(admin)
    job_id = padded_job(server, client, EVENTS)
    database = server.data_dir / "qatune.db"
    last = last_seq(database, job_id)

    series = client.get(f"/jobs/{job_id}/series").json()
    assert series["steps_read"] == EVENTS // 2 and len(series["points"]) <= 600
    assert series["latest"]["step"] == (last - last % 2) // 2

    page = signed_in_page(browser, server, admin, viewport={"width": 1280, "height": 900})
    started = time.monotonic()
    page.goto(f"{server.url}/#/jobs/{job_id}")
    log = page.locator("#job-log")
    expect(log).to_contain_text(f"line {last}:", timeout=60_000)
    expect(page.locator("#loss-chart polyline")).to_have_count(1)
    opened = time.monotonic() - started
    lines = log.locator("div").count()
    points = len(page.locator("#loss-chart polyline").get_attribute("points").split())  # type: ignore[union-attr]
    print(
        f"\n{EVENTS:,} events: the page opened in {opened:.2f} s ({lines} lines, {points} points)"
    )
    assert lines == 500 and points <= 600
    assert opened < 2.0, opened
    shot(page, "long-job")

    # Reading back: a page of earlier lines, in order, above those shown.
    page.get_by_role("button", name="Show earlier lines").click()
    expect(log.locator("div").first).to_contain_text(f"line {last - 999}:")
    assert log.locator("div").count() == 1000

    # Events stream in while the page is open: frames keep coming, the window stays bounded.
    page.evaluate(
        """() => { window.longest = 0; let last = performance.now();
        const tick = (now) => { window.longest = Math.max(window.longest, now - last); last = now;
        requestAnimationFrame(tick); }; requestAnimationFrame(tick); }"""
    )
    log.evaluate("node => { node.scrollTop = node.scrollHeight; }")  # following again
    for batch in range(5):
        begin = last + 1 + batch * 1000
        pad_events(database, job_id, range(begin, begin + 1000), EVENTS)
        time.sleep(0.5)
    last += 5000
    expect(log).to_contain_text(f"line {last}:", timeout=60_000)
    longest = page.evaluate("window.longest")
    print(f"5,000 streamed events: longest frame {longest:.0f} ms")
    assert log.locator("div").count() <= 1000 + 100  # trimmed each frame to the window
    points = len(page.locator("#loss-chart polyline").get_attribute("points").split())  # type: ignore[union-attr]
    assert points <= 1200
    assert longest < 500, longest
