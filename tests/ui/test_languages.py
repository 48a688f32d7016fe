"""The UI in 简体中文: switched from English, every page shows none of its own words in
English (what users wrote and the names of technical things aside), nor any of the
server's (its errors and a job's log come in the language the UI asks for), and dates
follow the language chosen, not the browser's."""

import re
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, QA_FILE, Server, login_over_http
from tests.ui.conftest import CHROMIUM, shot

pytestmark = [pytest.mark.ui, pytest.mark.slow]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (scripts/test.sh installs it)", allow_module_level=True
    )

from playwright.sync_api import Browser, FilePayload, Page, expect  # noqa: E402

# Names of things, the same in any language (lower case)
TERMS = set(
    """
    admin all-linear alpaca alpha answer api auto beta bf16 builtin cpp cpu csv cuda dpo e-4
    english eq eta evals exact f16 face fp16 fp32 gb gguf gpu grader grpo hub hugging
    huggingface-cli id input instruct instruction item json jsonl kl llama lm lora mb messages
    modelfile models mps ms my-model name nf4 ollama openai operation output output_text peft
    post q8_0 qatune qlora question qwen reference rewordings rouge rouge-l rss safetensors sample
    sse smollm2-135m-instruct string_check studio tiny tok top-p transformers type url utf xe7
    apple avx512-bf16 amx bitsandbytes gc gloo lr malloc_trim max_seq_length nccl qatune_device
    trl sharegpt tsv rewording excel
    """.split()
)
# What users wrote or the server named, shown as it is: not the UI's own words
CONTENT = ", ".join(
    [
        "table.answers tbody",  # questions and answers
        "#dataset-preview",
        ".answer",
        "option",  # model, dataset and job names in pickers
        "code",
        "pre",
        "textarea",
        "#jobs-table td:nth-child(2)",  # job names
        "#datasets-table td:first-child",  # file names
        "#job-title",
        ".who",  # the user's name
        ".brand",
        "#lang",  # each language named in itself
    ]
)
SCAN = """(content) => {
  const seen = [];
  const visible = (el) =>
    el && el.offsetParent !== null && getComputedStyle(el).visibility !== "hidden";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !visible(el) || el.closest(content)) continue;
    if (el.closest("script, style")) continue;
    seen.push(node.textContent.trim());
  }
  for (const el of document.querySelectorAll("[placeholder], [title], [aria-label]")) {
    if (!visible(el) || el.closest(content)) continue;
    for (const name of ["placeholder", "title", "aria-label"]) {
      if (el.getAttribute(name)) seen.push(el.getAttribute(name));
    }
  }
  return seen;
}"""
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*[A-Za-z0-9]")
# File names, paths and addresses (faq.jsonl, docs/api.md, /v1/evals): names, not words
NAMES = re.compile(r"\S*[./]\S*")


def english(page: Page) -> list[str]:
    """The page's own text that holds a word of English that is not a name of a thing."""
    found = []
    for text in page.evaluate(SCAN, CONTENT):
        words = [w for w in WORD.findall(NAMES.sub(" ", text)) if w.lower() not in TERMS]
        if words:
            found.append(f"{text[:120]!r} ({', '.join(words[:5])})")
    return found


def trained_job(server: Server) -> int:
    """A small finished job, made over the API, for the job page to show."""
    admin = login_over_http(server)
    with httpx.Client(base_url=server.url, headers=admin, timeout=60) as client:
        lines = QA_FILE.read_bytes().splitlines()[:6]
        files = {"file": ("faq.jsonl", b"\n".join(lines), "application/jsonl")}
        dataset = client.post("/datasets", files=files).json()["id"]
        job = client.post("/jobs", json={"dataset_id": dataset, "hyperparameters": {"epochs": 2}})
        assert job.status_code == 201, job.text
        job_id = int(job.json()["id"])
        deadline = time.monotonic() + 300
        while client.get(f"/jobs/{job_id}").json()["status"] != "succeeded":
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(1)
    return job_id


def test_every_page_in_chinese_has_no_english_of_its_own(browser: Browser, server: Server) -> None:
    job_id = trained_job(server)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server.url}/")
    page.evaluate("localStorage.setItem('qatune.lang', 'en')")
    page.reload()
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    page.locator("#lang").select_option("zh")
    expect(page.get_by_role("heading", name="任务")).to_be_visible()

    untranslated: dict[str, list[str]] = {}
    for route in ("jobs", "new", "datasets", "playground", "evals", "users", "account"):
        page.goto(f"{server.url}/ui/#/{route}")
        expect(page.locator("main h1")).to_be_visible()
        page.wait_for_load_state("networkidle")
        untranslated[route] = english(page)
        if route == "datasets":  # dates in the language's form (2026/11/25), not 11/25/2026
            created = page.locator("#datasets-table tbody td.hide-sm").first.inner_text()
            assert re.search(r"\d{4}/\d{1,2}/\d{1,2}", created), created
            # The server's words about a broken file, in the language chosen
            broken = b'{"question": " ", "answer": "a"}\n{"question": "q", "answer": 5}\n'
            upload: FilePayload = {
                "name": "faq.jsonl",
                "mimeType": "application/jsonl",
                "buffer": broken,
            }
            page.set_input_files("#dataset-file", files=[upload])
            expect(page.locator(".problems li")).to_have_count(2)
            expect(page.locator(".problems")).to_contain_text("请修正后重新上传")
    page.goto(f"{server.url}/ui/#/jobs/{job_id}")
    expect(page.locator("#answers table")).to_be_visible(timeout=60_000)
    page.wait_for_load_state("networkidle")
    untranslated["job"] = english(page)
    shot(page, "11-job-detail-zh")

    missed = {route: found for route, found in untranslated.items() if found}
    assert not missed, "English left on the Chinese pages:\n" + "\n".join(
        f"{route}: {line}" for route, found in missed.items() for line in found
    )
