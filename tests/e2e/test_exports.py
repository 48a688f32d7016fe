"""Exports of a trained job, through a live server: the adapter's zip loads with peft on
the exported base in a user's own code, where qatune is not importable; the merged model is
built in the background with progress, cached, loads with plain transformers and answers
as the unmerged adapter does, and goes when the job goes; the GGUF export loads in
llama.cpp itself and answers as qatune does."""

import io
import json
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    Server,
    answers,
    login_over_http,
    qa_pairs,
    run_qatune,
    unique,
    wait_for_status,
)

pytestmark = pytest.mark.slow

# A user's own code: the merged folder with transformers alone, and the adapter on the
# exported base with peft, both greedy, fp32.
USER_CODE = """
import json, sys
from peft import AutoPeftModelForCausalLM
from transformers import AutoModelForCausalLM, AutoTokenizer
merged_folder, adapter_folder, questions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

def answers(model, tokenizer):
    out = []
    for question in questions:
        inputs = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}],
            add_generation_prompt=True, return_tensors="pt", return_dict=True,
        )
        output = model.generate(**inputs, max_new_tokens=256, do_sample=False)
        start = inputs["input_ids"].shape[1]
        out.append(tokenizer.decode(output[0, start:], skip_special_tokens=True))
    return out

merged = answers(AutoModelForCausalLM.from_pretrained(merged_folder),
                 AutoTokenizer.from_pretrained(merged_folder))
unmerged = answers(AutoPeftModelForCausalLM.from_pretrained(adapter_folder),
                   AutoTokenizer.from_pretrained(adapter_folder))
assert not any(name == "app" or name.startswith("app.") for name in sys.modules), "qatune imported"
print(json.dumps({"merged": merged, "unmerged": unmerged}))
"""


# llama.cpp itself (llama-cpp-python), greedy, on the merged GGUF and on the base GGUF with
# the LoRA GGUF, prompts written from the GGUF's own chat template.
LLAMA_CPP_CODE = """
import json, sys
import jinja2
from llama_cpp import Llama
folder, questions = sys.argv[1], json.loads(sys.argv[2])

def answers(llm):
    template = jinja2.Template(llm.metadata["tokenizer.chat_template"])
    out = []
    for question in questions:
        prompt = template.render(
            messages=[{"role": "user", "content": question}], add_generation_prompt=True
        )
        # As llama-cli tokenizes: a BOS token only where the GGUF's metadata asks for one.
        tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        answer = []
        for token in llm.generate(tokens, temp=0.0, top_k=1, reset=True):
            if llm.token_eos() == token or len(answer) == 400:
                break
            answer.append(token)
        out.append(llm.detokenize(answer).decode("utf-8", "replace"))
    return out

result = {}
for name, files in {"merged": ("model-f16.gguf", None),
                    "lora": ("base-f16.gguf", "adapter-f16.gguf"),
                    "q8_0": ("model-q8_0.gguf", None)}.items():
    model, lora = files
    llm = Llama(model_path=f"{folder}/{model}", lora_path=lora and f"{folder}/{lora}",
                n_ctx=1024, seed=0, verbose=False)
    result[name] = answers(llm)
assert not any(name == "app" or name.startswith("app.") for name in sys.modules), "qatune imported"
print(json.dumps(result))
"""


def export_when_ready(
    api: httpx.Client, job_id: int, **params: str
) -> tuple[bytes, list[dict[str, object]]]:
    """Poll the export URL as a client would; the states seen on the way."""
    seen: list[dict[str, object]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        response = api.get(f"/jobs/{job_id}/export", params=params or {"format": "merged"})
        if response.status_code == 200:
            return response.content, seen
        assert response.status_code == 202, response.text
        assert response.headers["Retry-After"]
        seen.append(response.json())
        time.sleep(0.3)
    raise AssertionError(f"export not ready in 180 s: {seen[-1:]}")


def users_own_code(code: str, home: Path, *args: str) -> Any:
    """`code` run as a user would, in `home`, with none of qatune's environment (offline,
    a bare PATH): what its last line printed, as JSON."""
    mine = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=home,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert mine.returncode == 0, mine.stderr[-3000:]
    return json.loads(mine.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class TrainedJob:
    api: httpx.Client
    job_id: int
    pairs: list[dict[str, str]]
    served: list[str]  # the query endpoint's answers to the pairs' questions


def test_exports_load_elsewhere_and_answer_as_qatune(tmp_path: Path, shared_server: Server) -> None:
    """One trained job (training is the slow part), each export checked in turn."""
    server, pairs = shared_server, qa_pairs()[:10]
    api = server.client(login_over_http(server))
    jobs_dir = server.data_dir / "jobs"
    others = set(jobs_dir.iterdir()) if jobs_dir.is_dir() else set()  # earlier tests' jobs
    job = api.post("/jobs", json={"qa_pairs": pairs}).json()
    job = wait_for_status(api, job["id"], {"succeeded", "failed"}, timeout=300)
    assert job["status"] == "succeeded", job["error"]
    served = answers(api, job["id"], [p["question"] for p in pairs])
    trained = TrainedJob(api, job["id"], pairs, served)
    check_merged(trained, tmp_path / "merged", server)
    check_gguf(trained, tmp_path / "gguf")

    (job_dir,) = set(jobs_dir.iterdir()) - others
    assert (job_dir / "exports" / "merged.zip").is_file()
    assert (job_dir / "exports" / "gguf-f16.zip").is_file()
    assert api.delete(f"/jobs/{trained.job_id}").status_code == 204
    assert not job_dir.exists()  # its exports gone with it


def check_merged(trained: TrainedJob, home: Path, server: Server) -> None:
    """Built in the background, cached, loads with plain transformers where qatune is not
    importable and answers as the unmerged adapter on the exported base."""
    api, job_id, pairs, served = trained.api, trained.job_id, trained.pairs, trained.served
    listed, *_ = api.get(f"/jobs/{job_id}/exports").json()
    assert listed["format"] == "merged" and listed["status"] == "not_started"
    archive_bytes, seen = export_when_ready(api, job_id)
    assert seen and seen[0]["status"] == "running"  # it ran in the background
    listed, *_ = api.get(f"/jobs/{job_id}/exports").json()
    assert listed["status"] == "ready" and listed["size_bytes"] == len(archive_bytes)
    assert 0.8 < listed["size_bytes"] / listed["estimated_bytes"] < 1.25  # offered beforehand
    again = api.get(f"/jobs/{job_id}/export", params={"format": "merged"})
    assert again.status_code == 200 and again.content == archive_bytes  # cached

    home.mkdir()
    archive = zipfile.ZipFile(io.BytesIO(archive_bytes))
    archive.extractall(home)
    for entry in archive.infolist():
        assert stat.S_IMODE(entry.external_attr >> 16) == 0o644, entry.filename
    merged = home / f"qatune-job-{job_id}-merged"
    names = {p.name for p in merged.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "README.md"} <= names
    assert not any(name.endswith((".bin", ".pt")) for name in names)
    assert "adapter_config.json" not in names  # a whole model, not an adapter
    assert "AutoModelForCausalLM" in (merged / "README.md").read_text()
    # The adapter's own zip, as a user takes it home: it names the base by the folder
    # `qatune export-base` writes beside it, not by a path on the server.
    adapter_zip = zipfile.ZipFile(io.BytesIO(api.get(f"/jobs/{job_id}/adapter").content))
    adapter_zip.extractall(home)
    for entry in adapter_zip.infolist():
        assert stat.S_IMODE(entry.external_attr >> 16) == 0o644, entry.filename
    adapter = home / f"qatune-job-{job_id}"
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "qatune-builtin-tiny-v2"
    card = (adapter / "README.md").read_text()
    assert "qatune export-base builtin:tiny qatune-builtin-tiny-v2" in card
    assert f"{len(pairs)} QA pairs" in card and "sha256" in card and "| `learning_rate` |" in card
    exported = run_qatune(
        server.env, "export-base", "builtin:tiny", str(home / "qatune-builtin-tiny-v2")
    )
    assert exported.returncode == 0, exported.stderr[-2000:]

    questions = json.dumps([p["question"] for p in pairs], ensure_ascii=False)
    result = users_own_code(USER_CODE, home, merged.name, f"qatune-job-{job_id}", questions)
    assert result["merged"] == result["unmerged"]  # merging changed no answer
    right = [m.strip() == p["answer"] for m, p in zip(result["merged"], pairs, strict=True)]
    assert sum(right) >= 9
    # What the service answers right (bf16 there), the merged model answers the same.
    for mine_answer, theirs, pair in zip(result["merged"], served, pairs, strict=True):
        if theirs.strip() == pair["answer"]:
            assert mine_answer.strip() == theirs.strip()


def check_gguf(trained: TrainedJob, home: Path) -> None:
    """Loads in llama.cpp itself: the merged file and the base with the LoRA file answer
    exactly as qatune does; the q8_0 file nearly so."""
    api, job_id, pairs, served = trained.api, trained.job_id, trained.pairs, trained.served
    listed = {(e["format"], e["outtype"]): e for e in api.get(f"/jobs/{job_id}/exports").json()}
    assert set(listed) == {("merged", None), ("gguf", "f16"), ("gguf", "bf16"), ("gguf", "q8_0")}
    assert listed[("gguf", "q8_0")]["download"].endswith("format=gguf&outtype=q8_0")

    for outtype in ("f16", "q8_0"):
        archive_bytes, seen = export_when_ready(api, job_id, format="gguf", outtype=outtype)
        assert seen and 0 <= float(str(seen[-1]["progress"])) <= 1
        zipfile.ZipFile(io.BytesIO(archive_bytes)).extractall(home)
        estimate = listed[("gguf", outtype)]["estimated_bytes"]
        assert 0.8 < len(archive_bytes) / estimate < 1.25, (outtype, len(archive_bytes), estimate)
    folder = home / f"qatune-job-{job_id}-gguf-f16"
    assert {p.name for p in folder.iterdir()} == {
        "model-f16.gguf", "adapter-f16.gguf", "base-f16.gguf", "Modelfile", "README.md"
    }  # fmt: skip
    shutil.copy(home / f"qatune-job-{job_id}-gguf-q8_0" / "model-q8_0.gguf", folder)
    modelfile = (folder / "Modelfile").read_text()
    assert "FROM ./model-f16.gguf" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile
    assert "ollama create" in (folder / "README.md").read_text()

    questions = json.dumps([p["question"] for p in pairs], ensure_ascii=False)
    result = users_own_code(LLAMA_CPP_CODE, home, str(folder), questions)
    assert result["merged"] == served  # llama.cpp answers as qatune does, every question
    assert result["lora"] == served
    right = [a.strip() == p["answer"] for a, p in zip(result["q8_0"], pairs, strict=True)]
    assert sum(right) >= 9  # 8-bit weights: allowed one slip


def test_exports_refuse_what_they_cannot_do(shared_server: Server) -> None:
    server = shared_server
    admin = server.client(login_over_http(server))
    bad = admin.get("/jobs/1/export", params={"format": "pickle"})
    assert bad.status_code == 422 and "merged" in bad.text
    mixed = admin.get("/jobs/1/export", params={"format": "merged", "outtype": "q8_0"})
    assert mixed.status_code == 422 and "outtype applies to format=gguf only" in mixed.text
    job = admin.post("/jobs", json={"qa_pairs": qa_pairs()[:4], "hyperparameters": {
        "epochs": 1}}).json()  # fmt: skip
    early = admin.get(f"/jobs/{job['id']}/export", params={"format": "merged"})
    if early.status_code != 200:  # it may already have finished on a fast machine
        assert early.status_code in (409, 202), early.text
    name = unique("mallory")
    password = f"{name}-kettle-marble-57"
    created = admin.post("/users", json={"username": name, "password": password})
    assert created.status_code == 201, created.text
    mallory = server.client(login_over_http(server, name, password))
    assert mallory.get(f"/jobs/{job['id']}/export", params={"format": "merged"}).status_code == 404
    assert mallory.get(f"/jobs/{job['id']}/exports").status_code == 404
    wait_for_status(admin, job["id"], {"succeeded", "failed"}, timeout=300)
