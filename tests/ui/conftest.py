"""Real headless Chromium (Debian's), shared by the browser tests."""

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.conftest import ROOT

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


def shot(page: "Page", name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)
    if os.environ.get("QATUNE_UPDATE_SCREENSHOTS"):
        target = ROOT / "docs" / "screenshots"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHOTS / f"{name}.png", target / f"{name}.png")
