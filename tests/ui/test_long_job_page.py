"""A job page with 100,000 events, in a real Chromium: it opens at once, keeps its log and
charts bounded, pages the log back on demand, and stays responsive while events stream.

A job writes about one event a training second, so these are the events of a day-long
run, written into the server's own SQLite file as its worker writes them."""

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.ml.events import Progress
from app.ml.memory import MemorySnapshot
from tests.conftest import Server, login_over_http, qa_pairs
from tests.ui.conftest import CHROMIUM, shot

pytestmark = [pytest.mark.ui, pytest.mark.slow]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (scripts/test.sh installs it)", allow_module_level=True
    )

from playwright.sync_api import Browser, expect  # noqa: E402

EVENTS = 100_000


def pad(database: Path, job_id: int, seqs: range) -> None:
    """Events as a training run writes them (app/services/jobs.py, add_event): a progress
    event a step, its figures beside it in job_curve, a line between."""
    memory = MemorySnapshot(rss_mb=900.0)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    rows, curve = [], []
    for seq in seqs:
        step = seq // 2
        data = "{}"  # a message alone
        if seq % 2 == 0:
            progress = Progress(
                step=step, total_steps=EVENTS, epoch=step / 100, loss=2.0 / (1 + step / 5000),
                learning_rate=2e-4, tokens_per_second=400.0, eta_seconds=100.0, memory=memory,
            )  # fmt: skip
            data = progress.model_dump_json()
            curve.append((job_id, seq, step, progress.loss))
        rows.append((job_id, seq, now, "INFO", f"line {seq}: step {step}", data))
    with closing(sqlite3.connect(database, timeout=30)) as connection, connection:
        connection.executemany(
            "INSERT INTO job_events (job_id, seq, ts, level, message, data) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        connection.executemany(
            "INSERT INTO job_curve (job_id, seq, step, loss) VALUES (?, ?, ?, ?)", curve
        )


def test_a_job_with_100k_events_opens_at_once_and_streams_on(
    browser: Browser, make_server: Callable[..., Server]
) -> None:
    server = make_server(QATUNE_EMBEDDED_WORKER="false")  # the job stays as padded
    admin = login_over_http(server)
    client = server.client(admin)
    job_id = client.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}).json()["id"]
    database = server.data_dir / "qatune.db"
    with closing(sqlite3.connect(database)) as connection:
        (written,) = connection.execute(
            "SELECT max(seq) FROM job_events WHERE job_id = ?", (job_id,)
        ).fetchone()
    first = (written or 0) + 1
    pad(database, job_id, range(first, first + EVENTS))
    last = first + EVENTS - 1

    series = client.get(f"/jobs/{job_id}/series").json()
    assert series["steps_read"] == EVENTS // 2 and len(series["points"]) <= 600
    assert series["latest"]["step"] == (last - last % 2) // 2

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server.url}/")
    page.evaluate(
        "token => sessionStorage.setItem('qatune.token', token)", admin["Authorization"][7:]
    )
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
        pad(database, job_id, range(begin, begin + 1000))
        time.sleep(0.5)
    last += 5000
    expect(log).to_contain_text(f"line {last}:", timeout=60_000)
    longest = page.evaluate("window.longest")
    print(f"5,000 streamed events: longest frame {longest:.0f} ms")
    assert log.locator("div").count() <= 1000 + 100  # trimmed each frame to the window
    points = len(page.locator("#loss-chart polyline").get_attribute("points").split())  # type: ignore[union-attr]
    assert points <= 1200
    assert longest < 500, longest
