"""The admin UI in a real headless Chromium against a real server, as a person uses it."""

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import openpyxl
import pytest

from tests.conftest import (
    ADMIN_PASSWORD,
    QA_FILE,
    ROOT,
    Server,
    login_over_http,
    make_user_over_http,
    qa_pairs,
    tool_records,
)
from tests.ui.conftest import CHROMIUM, shot

pytestmark = [pytest.mark.ui, pytest.mark.slow]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (scripts/test.sh installs it)", allow_module_level=True
    )

from playwright.sync_api import (  # noqa: E402
    Browser,
    FilePayload,
    Locator,
    Page,
    Route,
    expect,
)


def nav(page: Page, name: str) -> Locator:
    return page.get_by_role("navigation").get_by_role("link", name=name, exact=True)


def sign_in(page: Page, server: Server, username: str, password: str) -> None:
    page.goto(f"{server.url}/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()


def test_a_person_trains_and_asks_a_model(
    browser: Browser, make_server: Callable[..., Server], tmp_path: Path
) -> None:
    # A first start with no admin password set: one is generated and printed, once.
    server = make_server(QATUNE_ADMIN_PASSWORD="")
    printed = re.search(r"created admin user 'admin' with password (\S+)", server.output())
    assert printed, server.output()[-2000:]
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.goto(f"{server.url}/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("navigation")).to_be_hidden()  # no menu before signing in
    shot(page, "01-sign-in")
    sign_in(page, server, "admin", printed.group(1))
    expect(page.get_by_text("No jobs yet")).to_be_visible()

    # A second user, from the Users page.
    nav(page, "Users").click()
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill("bob-kettle-marble-57")
    page.get_by_role("button", name="Create user").click()
    expect(page.locator("#users-table")).to_contain_text("bob")
    shot(page, "07-users")

    # A bad dataset: every problem, with its line.
    nav(page, "Datasets").click()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a"}\n{"question": "no answer"}\n{oops\n')
    page.locator("#dataset-file").set_input_files(str(bad))
    problems = page.locator(".problems")
    expect(problems).to_contain_text("line 2")
    expect(problems).to_contain_text('missing field "answer"')
    expect(problems).to_contain_text("line 3")
    shot(page, "05-dataset-rejected")
    book = openpyxl.Workbook()  # in a workbook of several sheets, with its sheet
    book.create_sheet("Returns").append(["question", "answer"])
    book["Returns"].append(["Can I return a gift?", None])
    book.save(workbook := tmp_path / "faq.xlsx")
    page.locator("#dataset-file").set_input_files(str(workbook))
    expect(problems).to_contain_text("sheet “Returns”, line 2")

    # A good one, with its preview.
    page.locator("#dataset-file").set_input_files(str(QA_FILE))
    expect(page.locator("#dataset-preview")).to_contain_text(qa_pairs()[0]["question"])
    expect(page.locator("#datasets-table tbody tr")).to_have_count(1)
    shot(page, "05-datasets")

    # A job on the built-in model, with the planner's estimate shown.
    nav(page, "New job").click()
    expect(page.locator("#base_model")).to_have_value("builtin:tiny")
    expect(page.locator("#estimate")).to_contain_text("GB")
    # A time before any job has run on the model: rough, from this machine's speed.
    expect(page.locator("#estimate")).to_contain_text("(rough: this machine's speed")
    # The base's weights: a 4-bit base is planned as such, and said in the estimate.
    page.locator("#hp-quantization").select_option("4bit")
    expect(page.locator("#estimate")).to_contain_text("4-bit base (NF4)")
    page.locator("#hp-quantization").select_option("auto")
    expect(page.locator("#estimate")).not_to_contain_text("4-bit")
    page.locator("#hp-epochs").fill("500")
    page.get_by_role("button", name="Start training").click()
    expect(page.locator('[data-field="hyperparameters.epochs"] .field-error')).to_contain_text(
        '500 is not accepted; give a whole number from 1 to 100, or "auto"'
    )
    shot(page, "03-new-job-error")
    page.locator("#hp-epochs").fill("")
    page.get_by_role("button", name="Start training").click()
    expect(page).to_have_url(re.compile(r"#/jobs/\d+$"))

    # The progress bar moves, the loss chart and the log fill, and the job succeeds.
    bar = page.locator('[role="progressbar"]').first
    label = page.locator("#progress-label")
    values: list[int] = []
    for _ in range(600):
        values.append(int(bar.get_attribute("aria-valuenow") or 0))
        if page.locator(".badge.succeeded").count():
            break
        if 0 < values[-1] < 100 and len(set(values)) == 2:
            # Auto epochs: the length is the data's, estimated, and said as an estimate.
            expect(label).to_contain_text("until every answer is learned: about")
            shot(page, "04-job-running")
        page.wait_for_timeout(200)
    expect(page.locator(".badge.succeeded")).to_be_visible()
    seen = set(values)
    assert len([v for v in seen if 0 < v < 100]) >= 2, f"progress never moved: {values}"
    assert values == sorted(values), f"the bar went back: {values}"
    # The answers learned, against the target of all 30.
    expect(page.locator("#stat-learned")).to_contain_text(re.compile(r"^.*\d+ / 30$"))
    expect(page.locator("#job-log")).to_contain_text("Job succeeded")
    expect(page.locator("#loss-chart polyline")).to_have_count(1)
    expect(page.locator("#stat-stops")).to_contain_text("when learned")
    # The answers table: the training questions (no split here), tuned beside base.
    answers = page.locator("#answers table tbody tr")
    expect(answers).to_have_count(20)
    first = qa_pairs()[0]
    expect(answers.first).to_contain_text(first["question"])
    expect(page.locator("#answers-summary")).to_contain_text("exact")
    shot(page, "04-job-detail")
    # The merged export: prepared in the background, then offered with its size.
    export = page.locator('#exports [data-format="merged"]')
    expect(export).to_have_attribute("data-status", "not_started")
    export.get_by_role("button", name="Prepare").click()
    ready = export.get_by_role("button", name=re.compile(r"^Download \(\d+\.\d MB\)$"))
    expect(ready).to_be_visible(timeout=120_000)
    with page.expect_download() as download:
        ready.click()
    assert re.fullmatch(r"qatune-job-\d+-merged\.zip", download.value.suggested_filename)
    # A GGUF export (for llama.cpp and Ollama), one of three weight types.
    gguf = page.locator('#exports [data-export="gguf-q8_0"]')
    expect(gguf).to_contain_text("GGUF q8_0 for llama.cpp")
    prepare = gguf.get_by_role("button", name=re.compile(r"^Prepare \(about \d+\.\d MB\)$"))
    prepare.click()
    ready = gguf.get_by_role("button", name=re.compile(r"^Download \(\d+\.\d MB\)$"))
    expect(ready).to_be_visible(timeout=120_000)
    with page.expect_download() as download:
        ready.click()
    assert re.fullmatch(r"qatune-job-\d+-gguf-q8_0\.zip", download.value.suggested_filename)
    shot(page, "04-job-exports")

    # Graded on a file (here its own training file, so the tuned model knows the answers),
    # beside its base model: the report opens on both runs.
    grading = page.locator("#job-eval")
    expect(grading.get_by_label("exact answer")).to_be_checked()
    grading.get_by_role("button", name="Grade").click()
    grading.get_by_role("link", name="Open the report").click()
    expect(page.locator(".run-summary")).to_have_count(2)
    tuned = page.locator(".run-summary").first
    total = len(qa_pairs())
    expect(tuned.locator(".badge")).to_have_text("completed", timeout=120_000)
    counts = re.fullmatch(
        rf"(\d+) passed, (\d+) failed, 0 errors, of {total}",
        tuned.locator(".run-counts").inner_text().strip(),
    )
    assert counts is not None and int(counts[1]) + int(counts[2]) == total
    # Every answer in fp32; where the CPU has native bf16, training and serving run in it
    # and a greedy answer may break a near-tie the training's own check did not (29 of 30).
    assert int(counts[1]) >= total - 2, counts[0]
    expect(page.locator(".run-summary").nth(1).locator(".badge")).to_have_text(
        "completed", timeout=120_000
    )
    expect(page.locator("#eval-items tbody tr")).to_have_count(total)

    nav(page, "Jobs").click()
    expect(page.locator("#jobs-table")).to_contain_text("succeeded")
    shot(page, "02-jobs")

    # The playground answers with the trained answer, beside the base model's.
    nav(page, "Playground").click()
    pair = qa_pairs()[3]
    page.get_by_label("Question").fill(pair["question"])
    # No cap by default: the tuned model ends its own answer, however long it was trained.
    expect(page.locator("#play-max")).to_have_value("")
    page.get_by_role("button", name="Ask").click()
    # beside the suite's other jobs the answer can take over a minute
    expect(page.locator("#answer-tuned")).to_have_text(pair["answer"], timeout=120_000)
    expect(page.locator("#answer-base")).not_to_have_text("Generating…")
    # Ask works again once the tuned answer ends; the untrained base model's answer stops at
    # about the tuned one's length, and the page says why it reads as noise.
    expect(page.get_by_role("button", name="Ask")).to_be_enabled(timeout=15_000)
    expect(page.locator("#base-untrained")).to_be_visible()
    # A second question is asked on its own, as it was trained: its own trained answer.
    second = qa_pairs()[5]
    page.get_by_label("Question").fill(second["question"])
    with page.expect_request(lambda r: r.url.endswith("/v1/chat/completions")) as sent:
        page.get_by_role("button", name="Ask").click()
    assert [m["role"] for m in (sent.value.post_data_json or {})["messages"]] == ["user"]
    expect(page.locator("#answer-tuned")).to_have_text(second["answer"], timeout=120_000)
    expect(page.get_by_role("button", name="Ask")).to_be_enabled(timeout=15_000)
    # With "Follow up", the next goes on the conversation so far (the second question's):
    # each model gets its own answers.
    page.get_by_label("Follow up", exact=False).check()
    follow_up = qa_pairs()[4]
    page.get_by_label("Question").fill(follow_up["question"])
    with page.expect_request(lambda r: r.url.endswith("/v1/chat/completions")) as sent:
        page.get_by_role("button", name="Ask").click()
    body = sent.value.post_data_json or {}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"] == second["question"]
    # (trained on single questions, the tiny model's answer in a conversation is its own)
    expect(page.locator("#thread-tuned")).to_contain_text(second["answer"])
    first_base = page.locator("#thread-base .turn").nth(1).inner_text()  # role + answer
    cap = max(40, round(len(second["answer"]) * 1.5))  # characters; 256 tokens uncapped
    # Still writing when the tuned answer ended, it was cut there (" …"); an answer that
    # ended first, by itself, is shown whole (the untrained base's random bytes at times)
    cut = first_base.endswith("…")
    assert not cut or len(first_base) <= cap + 40, (len(first_base), cap)
    expect(page.locator("#answer-tuned")).not_to_have_text(re.compile(r"^$|Generating…"))
    shot(page, "06-playground")
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator("#thread-tuned")).to_be_empty()

    # Chinese, remembered across a reload.
    page.locator("#lang").select_option("zh")
    expect(nav(page, "任务")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="试用")).to_be_visible()
    shot(page, "08-chinese")
    page.locator("#lang").select_option("en")

    # Bob sees none of admin's jobs.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, server, "bob", "bob-kettle-marble-57")
    expect(page.get_by_text("No jobs yet")).to_be_visible()
    expect(nav(page, "Users")).to_be_hidden()


def test_an_admin_disables_resets_and_deletes_a_user(browser: Browser, server: Server) -> None:
    make_user_over_http(server, login_over_http(server), "carol")
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    nav(page, "Users").click()
    row = page.locator('#users-table tr[data-user="carol"]')
    expect(row.locator(".state")).to_have_text("active")
    expect(page.locator('#users-table tr[data-user="admin"] button')).to_have_count(0)

    row.locator('[data-action="toggle"]').click()
    expect(row.locator(".state")).to_have_text("disabled")
    shot(page, "09-users-disabled")
    refused = httpx.post(
        f"{server.url}/auth/token", data={"username": "carol", "password": "carol-kettle-marble-57"}
    )
    assert refused.status_code == 401 and "disabled" in refused.text
    row.locator('[data-action="toggle"]').click()
    expect(row.locator(".state")).to_have_text("active")

    page.once("dialog", lambda dialog: dialog.accept("cobalt-meadow-41-anchor"))
    row.locator('[data-action="password"]').click()
    expect(page.locator("#toast")).to_contain_text("Set a new password for carol")
    login_over_http(server, "carol", "cobalt-meadow-41-anchor")

    page.once("dialog", lambda dialog: dialog.accept())
    row.locator('[data-action="delete"]').click()
    expect(row).to_have_count(0)


def test_signing_in_to_an_account_under_attack_proves_work_by_itself(
    browser: Browser, make_server: Callable[..., Server]
) -> None:
    server = make_server(QATUNE_TRUSTED_PROXIES="127.0.0.1")
    for guess in range(12):  # a botnet's guesses, each from its own address
        address = {"X-Forwarded-For": f"10.7.0.{guess + 1}"}
        data = {"username": "admin", "password": f"guess-{guess}"}
        httpx.post(f"{server.url}/auth/token", data=data, headers=address)
    page = browser.new_page()
    asked: list[str] = []
    page.on("response", lambda r: asked.append(r.headers.get("x-qatune-work-bits", "")))
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible(timeout=60_000)
    assert "16" in asked  # it was asked for work, did it, and got in


def test_expired_session_returns_to_sign_in(browser: Browser, server: Server) -> None:
    page = browser.new_page()
    page.goto(f"{server.url}/ui/")
    page.evaluate("sessionStorage.setItem('qatune.token', 'expired.or.forged')")
    page.goto(f"{server.url}/ui/#/jobs")
    expect(page.get_by_text("Your session has expired")).to_be_visible()


def test_model_output_is_never_html(browser: Browser, server: Server) -> None:
    """A dataset whose answer is markup shows as text in the preview, not as elements; so
    do a function-calling record's tools, calls and results."""
    page = browser.new_page()
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    nav(page, "Datasets").click()
    record = tool_records()[0]
    record["messages"][2]["content"] = "<b>sunny</b>"
    lines = [{"question": "<img src=x onerror=alert(1)>", "answer": "<b>bold</b>"}, record]
    page.locator("#dataset-file").set_input_files(
        files=[
            FilePayload(
                name="xss.jsonl",
                mimeType="application/json",
                buffer="".join(json.dumps(line) + "\n" for line in lines).encode(),
            )
        ]
    )
    preview = page.locator("#dataset-preview")
    expect(preview).to_contain_text("<img src=x onerror=alert(1)>")
    # The call is the answer of the second row; the third answers after the tool's result
    expect(preview).to_contain_text('get_weather({"city": "Paris"})')
    expect(preview.locator("tr").nth(3)).to_contain_text("Tool<b>sunny</b>")
    expect(preview.locator("tr").nth(3)).to_contain_text("Toolsget_weather")
    assert preview.locator("img, b").count() == 0


def test_what_an_upload_passed_over_is_said_beside_it(
    browser: Browser, server: Server, tmp_path: Path
) -> None:
    """A workbook's sheet of a table in words qatune does not read, and a column not read:
    said beside the upload (as text, whatever a sheet is named) and with the dataset."""
    page = browser.new_page()
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    nav(page, "Datasets").click()
    book = openpyxl.Workbook()
    faq = book.active
    assert faq is not None
    faq.append(["Question", "Answer", "Category"])
    faq.append(["Is there parking?", "Yes, behind the shop.", "Visits"])
    book.create_sheet("<img src=x onerror=alert(1)>").append(["Frage", "Antwort"])
    book.save(workbook := tmp_path / "passed-over.xlsx")
    page.locator("#dataset-file").set_input_files(str(workbook))
    notes = page.locator("#upload-result #dataset-notes li")
    expect(notes).to_have_count(2)
    expect(notes.nth(0)).to_contain_text("the columns ['Category'] were not read")
    expect(notes.nth(1)).to_contain_text("the sheet '<img src=x onerror=alert(1)>' was passed")
    assert page.locator("#upload-result img").count() == 0
    expect(page.locator("#preview #dataset-notes")).to_have_count(0)  # said once, above
    page.get_by_role("button", name="passed-over.xlsx", exact=True).click()
    expect(page.locator("#preview #dataset-notes li")).to_have_count(2)


def test_usable_on_a_phone(browser: Browser, server: Server) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 800})
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 392, f"page scrolls sideways on a phone ({width}px)"
    shot(page, "09-phone")


def test_api_keys_and_the_password_from_the_account_page(
    browser: Browser, make_server: Callable[..., Server]
) -> None:
    import httpx

    server = make_server()  # its own: the admin's password changes
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    nav(page, "Account").click()
    page.get_by_label("What the key is for").fill("notebook")
    page.get_by_role("button", name="Create key").click()
    secret = page.locator("#key-secret").inner_text()
    assert secret.startswith("qk-")
    expect(page.locator("#keys-table")).to_contain_text("never")
    # The key works like a sign-in, and the page says when it was last used.
    me = httpx.get(f"{server.url}/auth/me", headers={"Authorization": f"Bearer {secret}"})
    assert me.json()["username"] == "admin"
    page.reload()
    expect(page.locator("#keys-table .last-used")).not_to_have_text("never")
    shot(page, "10-account")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("No API keys yet.")).to_be_visible()
    revoked = httpx.get(f"{server.url}/auth/me", headers={"Authorization": f"Bearer {secret}"})
    assert revoked.status_code == 401

    # A weak new password is refused with the reason; a strong one signs everyone out.
    page.get_by_label("Current password").fill(ADMIN_PASSWORD)
    page.get_by_label("New password").fill("password1")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator("#password-form .alert")).to_contain_text("weak")
    page.get_by_label("New password").fill("quartz-meadow-81-falcon")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    sign_in(page, server, "admin", "quartz-meadow-81-falcon")


def test_the_api_docs_work_with_no_network_but_the_server(browser: Browser, server: Server) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    elsewhere: list[str] = []

    def only_the_server(route: Route) -> None:
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_server)
    page.goto(f"{server.url}/docs")
    expect(page.get_by_text("/v1/chat/completions", exact=True).first).to_be_visible()
    expect(page.get_by_text("/jobs/{job_id}/query", exact=True).first).to_be_visible()
    shot(page, "09-api-docs")
    page.goto(f"{server.url}/redoc")
    expect(page.get_by_text("/v1/chat/completions").first).to_be_attached()
    # Nothing else was asked of any other host; ReDoc's bundle fetches its own footer logo
    # from its CDN, which fails offline and costs nothing but the picture.
    assert [url for url in elsewhere if "cdn.redoc.ly" not in url] == [], elsewhere


def test_an_eval_runs_report_shows_each_item_and_compares_two_runs(
    browser: Browser, server: Server
) -> None:
    """report_url opens the run's page: every item, the answer, each criterion's score; a
    second run of the same eval side by side. Answers are text, never markup."""
    import httpx

    from tests.conftest import login_over_http

    headers = login_over_http(server)
    exact = {
        "type": "string_check",
        "name": "exact",
        "input": "{{ sample.output_text }}",
        "reference": "{{ item.answer }}",
        "operation": "eq",
    }
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        made = http.post(
            "/v1/evals",
            json={
                "name": "support answers",
                "data_source_config": {"type": "custom", "item_schema": {"type": "object"}},
                "testing_criteria": [exact],
            },
        )
        eval_id = made.json()["id"]
        items = [  # as a job's eval writes them, and a conversation with more to it
            {
                "question": "Where?",
                "answer": "Login page",
                "messages": [{"role": "user", "content": "Where?"}],
            },
            {
                "answer": "Now",
                "messages": [
                    {"role": "system", "content": "Be brief"},
                    {"role": "user", "content": [{"type": "text", "text": "When?"}]},
                ],
                "meta": {"source": "faq", "tags": ["a"]},
            },
        ]

        def run(name: str, answers: list[str]) -> dict[str, str]:
            rows = [
                {"item": item, "sample": {"output_text": answer}}
                for item, answer in zip(items, answers, strict=True)
            ]
            source = {"type": "jsonl", "source": {"type": "file_content", "content": rows}}
            started = http.post(
                f"/v1/evals/{eval_id}/runs", json={"name": name, "data_source": source}
            )
            for _ in range(100):
                found: dict[str, str] = http.get(
                    f"/v1/evals/{eval_id}/runs/{started.json()['id']}"
                ).json()
                if found["status"] == "completed":
                    return found
                time.sleep(0.1)
            raise AssertionError(found)

        before = run("before tuning", ["<b>No idea</b>", "Now"])
        after = run("after tuning", ["Login page", "Now"])

    page = browser.new_page(viewport={"width": 1280, "height": 860})
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    page.goto(before["report_url"])
    expect(page.get_by_role("heading", name="support answers: before tuning")).to_be_visible()
    expect(page.locator(".run-counts")).to_have_text("1 passed, 1 failed, 0 errors, of 2")
    table = page.locator("#eval-items")
    expect(table.locator("tr[data-item='0'] td.answer")).to_have_text("<b>No idea</b>")
    assert table.locator("b").count() == 0
    expect(table.locator("tr[data-item='0'] td.score.fail")).to_be_visible()
    # An item as a person reads it: the question once, a conversation as its turns, the
    # rest folded under its name
    first, second = (
        table.locator("tr[data-item='0'] td.item"),
        table.locator("tr[data-item='1'] td.item"),
    )
    expect(first).to_have_text("question: Where?answer: Login page")
    expect(second.locator(".turns")).to_have_text("system: Be briefuser: When?")
    expect(second.locator("details summary")).to_have_text("meta")
    assert "{" not in second.locator(".turns").inner_text()

    page.locator("#compare-with").select_option(after["id"])
    expect(page.locator(".run-summary")).to_have_count(2)
    expect(table.locator("tr[data-item='0'] td.answer").nth(1)).to_have_text("Login page")
    expect(table.locator("tr[data-item='0'] td.score.pass")).to_be_visible()
    shot(page, "11-eval-compare")

    nav(page, "Evals").click()
    expect(page.get_by_role("link", name="after tuning")).to_be_visible()


def test_a_reinforcement_job_from_the_new_job_page_charts_its_reward(
    browser: Browser, server: Server
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    nav(page, "Datasets").click()
    page.locator("#dataset-file").set_input_files(str(ROOT / "tests/data/faq_short.jsonl"))
    expect(page.locator("#dataset-preview")).to_contain_text("Can I pay by invoice?")

    nav(page, "New job").click()
    expect(page.locator("#grader")).to_be_hidden()
    page.locator("#method").select_option("reinforcement")
    expect(page.locator("#grader")).to_have_value(re.compile(r'"operation": "eq"'))
    page.locator("#grader").fill('{"type": "string_check", "name": "exact"}')  # no input
    page.get_by_role("button", name="Start training").click()
    expect(page.locator('[data-field="grader"] .field-error').first).to_be_visible()
    page.locator("#grader").fill(
        '{"type": "string_check", "name": "exact", "input": "{{ sample.output_text }}", '
        '"reference": "{{ item.answer }}", "operation": "eq"}'
    )
    page.locator("#hp-epochs").fill("2")
    page.locator("#hp-batch_size").fill("10")  # 2 steps an epoch
    page.locator("#hp-group_size").fill("2")
    page.get_by_role("button", name="Start training").click()
    expect(page).to_have_url(re.compile(r"#/jobs/\d+$"))
    expect(page.locator(".badge.succeeded")).to_be_visible(timeout=180_000)
    expect(page.locator("#stat-method")).to_contain_text("Reinforcement (GRPO), grader exact")
    expect(page.locator("#reward")).to_be_visible()
    expect(page.locator("#reward-chart polyline")).to_have_count(1)
    # The built-in model never says a whole answer right from scratch: after an epoch
    # (three steps at least) of rewards all 0 the run ends, and the job says why
    expect(page.locator("#reward-figures")).to_contain_text("Step 3: mean reward 0.000")
    expect(page.locator("body")).to_contain_text("every sampled answer scored 0")
    shot(page, "12-reinforcement-job")


def test_an_admin_types_a_model_and_it_is_checked_at_once(
    browser: Browser, server: Server, model_cache: Path
) -> None:
    """A hub id or a server directory, typed on the new-job page, is checked before any
    job is made of it: this offline service says what to do with a model it lacks."""
    page = browser.new_page()
    sign_in(page, server, "admin", ADMIN_PASSWORD)
    nav(page, "New job").click()
    page.locator("#base_model").select_option(label="Another: a hub id or a server directory…")
    typed, said = page.locator("#base_model_name"), page.locator("#model-check")
    typed.fill("someone/not-here")
    expect(said).to_contain_text("✗ someone/not-here is not cached here and QATUNE_OFFLINE is set")
    expect(said).to_contain_text("huggingface-cli download someone/not-here")
    directory = next(p for p in model_cache.iterdir() if (p / "config.json").is_file())
    typed.fill(str(directory))
    expect(said).to_contain_text("✓ ready here")
    shot(page, "03-new-job-model-check")
