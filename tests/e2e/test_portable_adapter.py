"""Take the adapter home: the zip loads in a user's own peft code, with no qatune import,
and answers as the query endpoint does."""

import io
import json
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import (
    Server,
    answers,
    login_over_http,
    qa_pairs,
    run_qatune,
    wait_for_status,
)

pytestmark = pytest.mark.slow

# What a user would write from the model card, run where qatune is not importable.
USER_CODE = """
import json, sys
from peft import AutoPeftModelForCausalLM
from transformers import AutoTokenizer
folder = sys.argv[1]
model = AutoPeftModelForCausalLM.from_pretrained(folder)
tokenizer = AutoTokenizer.from_pretrained(folder)
answers = []
for question in json.loads(sys.argv[2]):
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    output = model.generate(**inputs, max_new_tokens=256, do_sample=False)
    start = inputs["input_ids"].shape[1]
    answers.append(tokenizer.decode(output[0, start:], skip_special_tokens=True))
assert not any(name == "app" or name.startswith("app.") for name in sys.modules), "qatune imported"
print(json.dumps(answers))
"""


def test_the_zip_loads_with_peft_on_the_exported_base(tmp_path: Path, server: Server) -> None:
    pairs = qa_pairs()[:10]
    api = server.client(login_over_http(server))
    job = api.post("/jobs", json={"qa_pairs": pairs}).json()
    job = wait_for_status(api, job["id"], {"succeeded", "failed"}, timeout=300)
    assert job["status"] == "succeeded", job["error"]
    served = answers(api, job["id"], [p["question"] for p in pairs])

    home = tmp_path / "home"  # a fresh directory, as a user's
    home.mkdir()
    archive = zipfile.ZipFile(io.BytesIO(api.get(f"/jobs/{job['id']}/adapter").content))
    archive.extractall(home)
    folder = home / f"qatune-job-{job['id']}"
    for entry in archive.infolist():
        assert stat.S_IMODE(entry.external_attr >> 16) == 0o644, entry.filename
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "qatune-builtin-tiny-v2"  # not a server path
    card = (folder / "README.md").read_text()
    assert "qatune export-base builtin:tiny qatune-builtin-tiny-v2" in card
    assert "10 QA pairs" in card and "sha256" in card and "| `learning_rate` |" in card

    exported = run_qatune(
        server.env, "export-base", "builtin:tiny", str(home / "qatune-builtin-tiny-v2")
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    questions = json.dumps([p["question"] for p in pairs], ensure_ascii=False)
    mine = subprocess.run(
        [sys.executable, "-c", USER_CODE, folder.name, questions],
        cwd=home,  # the base resolves as the card says: a folder beside the adapter
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert mine.returncode == 0, mine.stderr[-3000:]
    peft_answers = [a.strip() for a in json.loads(mine.stdout.strip().splitlines()[-1])]
    rows = list(zip(peft_answers, [s.strip() for s in served], pairs, strict=True))
    # Every answer the service gets right, the user's code gets the same (fp32 there, bf16
    # in the service: only an answer the model is unsure of could tip the other way).
    assert all(mine == theirs for mine, theirs, pair in rows if theirs == pair["answer"])
    assert sum(mine == theirs for mine, theirs, _ in rows) >= 9
    assert sum(mine == pair["answer"] for mine, _, pair in rows) >= 9


def test_export_base_refuses_what_it_cannot_write(tmp_path: Path, server: Server) -> None:
    def export(*args: str) -> subprocess.CompletedProcess[str]:
        return run_qatune(server.env, "export-base", *args)

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    refused = export("builtin:tiny", str(tmp_path / "full"))
    assert refused.returncode == 2 and "not an empty directory" in refused.stderr
    assert export("Qwen/Qwen2.5-0.5B", str(tmp_path / "q")).returncode == 2
    assert "Unknown built-in model" in export("builtin:huge", str(tmp_path / "h")).stderr
