"""A new user's first hour, in real Chromium: the printed password, the README's dataset,
a job with every default, the playground. Each step's time is printed."""

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import QA_FILE, Server, qa_pairs
from tests.ui.conftest import CHROMIUM, shot

pytestmark = [pytest.mark.ui, pytest.mark.slow]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (scripts/test.sh installs it)", allow_module_level=True
    )

from playwright.sync_api import Browser, expect  # noqa: E402


def test_the_first_hour(browser: Browser, make_server: Callable[..., Server]) -> None:
    timings: list[tuple[str, float]] = []
    started = time.monotonic()

    def step(name: str) -> None:
        nonlocal started
        timings.append((name, time.monotonic() - started))
        started = time.monotonic()

    server = make_server(QATUNE_ADMIN_PASSWORD="")  # unset: generated and printed once
    printed = re.search(r"created admin user 'admin' with password (\S+)", server.output())
    assert printed, server.output()[-2000:]
    step("start the service")

    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.goto(f"{server.url}/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("navigation")).to_be_hidden()  # no menu before signing in
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(printed.group(1))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    step("sign in with the printed password")

    page.get_by_role("navigation").get_by_role("link", name="Datasets", exact=True).click()
    page.locator("#dataset-file").set_input_files(str(QA_FILE))
    expect(page.locator("#datasets-table tbody tr")).to_have_count(1)
    step("upload the README's dataset")

    page.get_by_role("navigation").get_by_role("link", name="New job", exact=True).click()
    expect(page.locator("#estimate")).to_contain_text("GB")
    page.get_by_role("button", name="Start training").click()
    expect(page).to_have_url(re.compile(r"#/jobs/\d+$"))
    step("start a job with every default")

    expect(page.locator(".badge.succeeded")).to_be_visible(timeout=600_000)
    step("watch it train to the end")

    page.get_by_role("navigation").get_by_role("link", name="Playground", exact=True).click()
    pair = qa_pairs()[7]
    page.get_by_label("Question").fill(pair["question"])
    page.get_by_role("button", name="Ask").click()
    expect(page.locator("#answer-tuned")).to_have_text(pair["answer"], timeout=120_000)
    shot(page, "10-first-hour-playground")
    step("ask it a trained question in the playground")

    print("\nthe first hour, step by step:")
    for name, seconds in timings:
        print(f"  {seconds:6.1f} s  {name}")
