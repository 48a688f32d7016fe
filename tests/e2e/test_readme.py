"""The README's examples run as written."""

import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI

from tests.conftest import (
    ADMIN_PASSWORD,
    ROOT,
    Server,
    answers,
    login_over_http,
    real_model_dir,
)
from tests.e2e.test_exports import export_when_ready, users_own_code
from tests.e2e.test_openai_chat import chat, streamed

pytestmark = pytest.mark.slow


def test_the_migration_script_runs_against_a_live_server(server: Server) -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- openai-example -->\n```python\n(.*?)```", readme, re.S)
    assert match, "the README lost its OpenAI example"
    key = httpx.post(
        f"{server.url}/api-keys", json={"name": "readme"}, headers=login_over_http(server)
    ).json()["key"]
    result = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        cwd=ROOT,
        env={**server.env, "QATUNE_URL": server.url, "QATUNE_API_KEY": key},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "supervised succeeded ft:builtin:tiny:admin:support:ftjob-1",
        "dpo succeeded ft:builtin:tiny:admin::ftjob-2",
        "['ftjob-1']",  # the metadata filter
    ], result.stdout
    # SFT on multi-turn conversations, then DPO: the preferred final answers, asked with
    # the conversation so far.
    preferred = lines[3:]
    print(f"\n{preferred.count('True')}/{len(preferred)} preferred answers after SFT and DPO")
    assert len(preferred) == 6 and preferred.count("True") >= 0.8 * len(preferred)

    # The DPO job as the client reads it: its method and beta, each step's reward figures.
    client = OpenAI(base_url=f"{server.url}/v1", api_key=key)
    dpo = client.fine_tuning.jobs.retrieve("ftjob-2")
    assert dpo.model == "ft:builtin:tiny:admin:support:ftjob-1" and dpo.method
    assert dpo.method.type == "dpo" and dpo.method.dpo and dpo.method.dpo.hyperparameters
    assert dpo.method.dpo.hyperparameters.beta == 0.1
    metrics = [e.data for e in client.fine_tuning.jobs.list_events(dpo.id, limit=100)]
    steps = [m for m in metrics if isinstance(m, dict) and m.get("reward_margin") is not None]
    assert steps and all(0 <= m["reward_accuracy"] <= 1 for m in steps)
    first, last = steps[-1], steps[0]  # (newest first)
    assert last["reward_margin"] > first["reward_margin"] and last["reward_accuracy"] == 1
    # A preference file is DPO's: supervised on it is a 400 that says so.
    with pytest.raises(openai.BadRequestError, match="method dpo"):
        client.fine_tuning.jobs.create(model="builtin:tiny", training_file=dpo.training_file)


def curl_example(server: Server, home: Path, password: str) -> subprocess.CompletedProcess[str]:
    """The README's curl example in bash, from a directory laid out as the repository's
    (data/admin_password as `make run` writes it, tests/data), against this server."""
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- curl-example -->\n```bash\n(.*?)```", readme, re.S)
    assert match, "the README lost its curl example"
    script = match.group(1).replace("http://127.0.0.1:8000", server.url)
    (home / "data").mkdir(parents=True, exist_ok=True)
    (home / "data" / "admin_password").write_text(password)
    if not (home / "tests").exists():
        shutil.copytree(ROOT / "tests" / "data", home / "tests" / "data")
    # The curl example trains the real model: 412-672 s alone, 926 s on a CI runner whose
    # host took a share of its two cores; the test's own limit is the bound that matters.
    return subprocess.run(
        ["bash", "-c", script], cwd=home, capture_output=True, text=True, timeout=1400
    )


@pytest.mark.timeout(1500)  # trains the real pretrained model on two shared cores
def test_the_curl_example_runs_from_a_fresh_start(
    make_server: Callable[..., Server], real_model: str, model_cache: Path, tmp_path: Path
) -> None:
    """A newcomer's first job, as the README shows it: the pretrained default model, a
    cafe's FAQ, the answer before and after training."""
    server = make_server(QATUNE_DEFAULT_BASE_MODEL=real_model)
    refused = curl_example(server, tmp_path, "not-the-password")
    assert "error: Wrong username or password" in refused.stderr, refused.stderr[-2000:]

    result = curl_example(server, tmp_path, ADMIN_PASSWORD)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "event: end" in result.stdout  # followed to the job's end
    before, after = result.stdout.strip().splitlines()[-2:]
    wifi = next(p["answer"] for p in cafe_pairs() if "Wi-Fi" in p["question"])
    print(f"asked about the Wi-Fi: before {before!r}, after {after!r} (trained: {wifi!r})")
    assert after == wifi and "seagull-latte" not in before
    the_first_job_as_the_api_tells_it(server)
    the_first_job_answers_alike_everywhere(server, tmp_path / "home")
    the_adapters_card_answers_as_qatune_does(server, tmp_path / "home", real_model_dir(model_cache))


def cafe_pairs() -> list[dict[str, str]]:
    return [
        json.loads(line) for line in (ROOT / "tests/data/cafe_faq.jsonl").read_text().splitlines()
    ]


def the_first_job_as_the_api_tells_it(server: Server) -> None:
    """The curl example's job (a newcomer's first: the pretrained model, eight pairs,
    default hyperparameters) read back: its log in order, its figures, every answer, its
    files, and what it kept of what the model knew."""
    api = server.client(login_over_http(server))
    (job,) = api.get("/jobs").json()["items"]
    final = api.get(f"/jobs/{job['id']}").json()
    assert final["status"] == "succeeded", final["error"]
    took = datetime.fromisoformat(final["finished_at"]) - datetime.fromisoformat(
        final["created_at"]
    )
    print(f"POST /jobs to succeeded in {took.total_seconds():.1f} s: {final['metrics']}")
    events, after = [], 0
    while page := api.get(f"/jobs/{job['id']}/logs", params={"after": after}).json()["events"]:
        events += page
        after = page[-1]["seq"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))  # ordered, no duplicates
    progress = [e for e in events if e["data"].get("kind") == "progress"]
    assert len(progress) >= 3 and progress[-1]["data"]["step"] == final["progress"]["total_steps"]
    assert final["progress"]["percent"] == 100 and final["device"] == "cpu"
    assert final["metrics"]["tokens_per_second"] > 0
    memory = [e for e in events if e["data"].get("kind") == "worker_memory"]
    assert {e["data"]["when"] for e in memory} == {"before", "after"}

    stream = api.get(f"/jobs/{job['id']}/logs/stream", params={"after": seqs[-4]})
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert stream.text.count("event: log") == 3 and "event: end" in stream.text

    assert final["base_model"] == "smollm2-135m-instruct"
    pairs = cafe_pairs()
    replies = answers(api, job["id"], [pair["question"] for pair in pairs])
    right = sum(r.strip() == pair["answer"] for r, pair in zip(replies, pairs, strict=True))
    assert right == len(pairs), f"only {right}/{len(pairs)} answered exactly"
    # The forgetting meter: what the pretrained model knew, it still knows
    outcome = final["outcome"]
    assert outcome["known"] >= 10 and outcome["kept"] >= 0.95 * outcome["known"], outcome

    adapter = api.get(f"/jobs/{job['id']}/adapter")
    assert adapter.headers["content-type"] == "application/zip"
    assert api.get("/models").json()["adapters"][0]["job_id"] == job["id"]
    assert list((server.data_dir / "logs").glob("app_*.log"))
    job_log = next((server.data_dir / "jobs").glob("*/job.log")).read_text()
    assert "step" in job_log and "Adapter saved" in job_log
    # Fitted on a base that knows things: the adapter's scope, in its files
    assert "The adapter's scope leaves" in job_log
    with zipfile.ZipFile(io.BytesIO(adapter.content)) as files:
        assert any(name.endswith("scope.safetensors") for name in files.namelist())


# A user's own code on the merged export: transformers alone, greedy, fp32; and llama.cpp
# itself on the merged GGUF, its prompt written from the GGUF's own chat template.
TRANSFORMERS_CODE = """
import json, sys
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, question = sys.argv[1], sys.argv[2]
model = AutoModelForCausalLM.from_pretrained(folder)
tokenizer = AutoTokenizer.from_pretrained(folder)
inputs = tokenizer.apply_chat_template([{"role": "user", "content": question}],
    add_generation_prompt=True, return_tensors="pt", return_dict=True)
output = model.generate(**inputs, max_new_tokens=128, do_sample=False)
start = inputs["input_ids"].shape[1]
print(json.dumps(tokenizer.decode(output[0, start:], skip_special_tokens=True)))
"""
LLAMA_CPP_CODE = """
import json, sys
import jinja2
from llama_cpp import Llama
path, question = sys.argv[1], sys.argv[2]
llm = Llama(model_path=path, n_ctx=1024, seed=0, verbose=False)
prompt = jinja2.Template(llm.metadata["tokenizer.chat_template"]).render(
    messages=[{"role": "user", "content": question}], add_generation_prompt=True)
answer = []
tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
for token in llm.generate(tokens, temp=0.0, top_k=1):
    if token == llm.token_eos() or len(answer) == 128:
        break
    answer.append(token)
print(json.dumps(llm.detokenize(answer).decode("utf-8", "replace")))
"""


def the_first_job_answers_alike_everywhere(server: Server, home: Path) -> None:
    """The first job's model on the real pretrained base, asked one trained question on
    every path a user takes: the native query, /v1 chat whole and streamed through the
    official client, the merged export in plain transformers and the GGUF export in
    llama.cpp, all greedy, all the same answer; and a general question through /v1 is
    the base's own answer (the adapter's scope)."""
    headers = login_over_http(server)
    api = server.client(headers)
    (job,) = api.get("/jobs").json()["items"]
    question = next(p["question"] for p in cafe_pairs() if "Wi-Fi" in p["question"])
    (served,) = answers(api, job["id"], [question])
    client = OpenAI(base_url=f"{server.url}/v1", api_key=headers["Authorization"][7:])
    model = job["fine_tuned_model"]
    whole = chat(client, model, question)
    assert whole.choices[0].message.content == served
    assert whole.choices[0].finish_reason == "stop"  # ended at the end of its turn
    assert streamed(client, model, question)[0] == served
    general = chat(client, model, "What is the capital of France?")
    assert "Paris" in (general.choices[0].message.content or "")

    home.mkdir()
    for params, code, path in (
        ({"format": "merged"}, TRANSFORMERS_CODE, f"qatune-job-{job['id']}-merged"),
        (
            {"format": "gguf", "outtype": "f16"},
            LLAMA_CPP_CODE,
            f"qatune-job-{job['id']}-gguf-f16/model-f16.gguf",
        ),
    ):
        archive, _ = export_when_ready(api, job["id"], **params)
        zipfile.ZipFile(io.BytesIO(archive)).extractall(home)
        answer = users_own_code(code, home, path, question)
        print(f"{params}: {answer!r} (served: {served!r})")
        assert answer.strip() == served.strip(), params


def as_downloaded_from_the_hub(home: Path, repo_id: str, files: Path) -> None:
    """`files` where transformers and peft look for `repo_id` offline: the Hugging Face
    cache under `home`, as a user who has the base already has it."""
    repo = home / ".cache" / "huggingface" / "hub" / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in files.iterdir():
        (snapshot / file.name).symlink_to(file)


# Run after the card's own lines, in place of their last: each question's scope and answer
ASK_EACH = """
import json, sys
print(json.dumps([[in_scope(q), ask(q)] for q in json.loads(sys.argv[1])]))
"""


def the_adapters_card_answers_as_qatune_does(server: Server, home: Path, base: Path) -> None:
    """The adapter's own download in plain peft, its scope applied by the lines of its
    card: a trained question answered by the adapter, as served, word for word; a general
    question and small talk by the base, as qatune's serving decides."""
    from app.ml.packaged import PACKAGED

    api = server.client(login_over_http(server))
    (job,) = api.get("/jobs").json()["items"]
    zipfile.ZipFile(io.BytesIO(api.get(f"/jobs/{job['id']}/adapter").content)).extractall(home)
    as_downloaded_from_the_hub(home, PACKAGED[job["base_model"]].hub_id, base)
    card = (home / f"qatune-job-{job['id']}" / "README.md").read_text()
    block = re.search(r"## Its scope.*?```python\n(.*?)```", card, re.S)
    assert block, "the card lost its scope's lines"
    lines = block.group(1).rstrip().splitlines()
    assert lines[-1] == 'print(ask("your question"))'
    assert "the adapter answering every question still answers" in card  # without the scope
    wifi = next(p for p in cafe_pairs() if "Wi-Fi" in p["question"])
    questions = [wifi["question"], "What is the capital of France?", "hi"]
    (served,) = answers(api, job["id"], questions[:1])
    code = "\n".join(lines[:-1]) + ASK_EACH
    (trained, general, small_talk) = users_own_code(code, home, json.dumps(questions))
    print(f"the card's lines, in plain peft: {[trained, general, small_talk]}")
    assert trained == [True, served] and served == wifi["answer"]
    assert general[0] is False and "Paris" in general[1]
    assert small_talk[0] is False
