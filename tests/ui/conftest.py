"""Real headless Chromium (Debian's), shared by the browser tests."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import ROOT, Server, start_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = ROOT / "test-output" / "screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator["Browser"]:
    from playwright.sync_api import expect, sync_playwright

    # CI machines are small and shared: wait for the page as a patient person would.
    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Iterator[Server]:
    """One server for a module's pages: each test adds only its own datasets, jobs and
    evals, and looks at nothing another adds (a start is ~6 s of a core). A test that
    changes what others rely on (the admin's password) starts its own (make_server)."""
    running = start_server(tmp_path_factory.mktemp("ui") / "data", model_cache)
    yield running
    running.stop()


def signed_in_page(
    browser: "Browser", server: Server, headers: dict[str, str], **options: Any
) -> "Page":
    """A new page (`options`: Playwright's, a viewport) signed in with `headers`' token, as
    the sign-in page leaves it, on the server's front page."""
    page = browser.new_page(**options)
    page.goto(f"{server.url}/")
    page.evaluate(
        "token => sessionStorage.setItem('qatune.token', token)", headers["Authorization"][7:]
    )
    return page


def shot(page: "Page", name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)
    if os.environ.get("QATUNE_UPDATE_SCREENSHOTS"):
        target = ROOT / "docs" / "screenshots"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHOTS / f"{name}.png", target / f"{name}.png")
