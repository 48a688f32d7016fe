"""The service's own paths on the real model: a default job killed and resumed, then an eval.

    python -m bench.real_service [--set staff] [--tokens 64]

One real service (`qatune serve`, SQLite) whose default base is SmolLM2-135M-Instruct
(bench/real_model.py), driven over HTTP and through the official `openai` client as a
user would:

1. A default job (auto epochs, the forgetting meter, the scope) on a FAQ of bench/data.
   Once it has saved a checkpoint the whole service is killed (SIGKILL: the training child
   dies with it) and started again; the job must be queued again, resume from that
   checkpoint (not from step 0) and succeed.
2. An eval with two string_check graders, "exact" (the answer as trained) and "fact" (the
   right fact in the answer, `ilike`), run on the base and on the tuned model (greedy):
   the trained questions, the same questions reworded (their second rewording) and the
   general questions of bench/data/general.json.

Prints the job's runs and steps, and each model's passes for each set. The grading is the
service's; no answer is judged here.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.real_model import DATA, REAL, real_model_dir
from tests.conftest import Server, free_port, login_over_http, service_env, wait_for_status
from tests.reliability.test_crashes import check_resumed_from_checkpoints

CRITERIA: Any = [
    {"type": "string_check", "name": "exact", "operation": "eq",
     "input": "{{ sample.output_text }}", "reference": "{{ item.answer }}"},
    {"type": "string_check", "name": "fact", "operation": "ilike",
     "input": "{{ sample.output_text }}", "reference": "{{ item.fact }}"},
]  # fmt: skip


def eval_items(faq: str) -> dict[str, list[dict[str, str]]]:
    """The items of each set: question, the answer as trained (if any), one right fact."""
    pairs = json.loads((DATA / f"{faq}_faq.json").read_text())["pairs"]
    general = json.loads((DATA / "general.json").read_text())["questions"]
    return {
        "trained": [{"question": p["question"], "answer": p["answer"], "fact": p["facts"][0]}
                    for p in pairs],
        "reworded": [{"question": p["reworded"][1], "answer": p["answer"], "fact": p["facts"][0]}
                     for p in pairs],
        "general": [{"question": g["question"], "answer": "", "fact": g["facts"][0]}
                    for g in general],
    }  # fmt: skip


def kill_after_checkpoint(server: Server, api: httpx.Client, job_id: int) -> int:
    """Kill the service once the job has saved a checkpoint while running; its step."""
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        job = api.get(f"/jobs/{job_id}").json()
        if job["status"] == "running" and job["checkpoint_step"]:
            server.kill()
            server.start()
            return int(job["checkpoint_step"])
        if job["status"] not in ("queued", "running"):
            raise RuntimeError(f"the job ended before a checkpoint: {job}")
        time.sleep(0.5)
    raise RuntimeError("no checkpoint in 30 minutes")


def passes(
    client: Any, eval_id: str, model: str, items: list[dict[str, str]], tokens: int
) -> dict[str, int]:
    """An eval run of `model` over the items: how many passed each grader."""
    template = [{"role": "user", "content": "{{ item.question }}"}]
    source: Any = {
        "type": "completions",
        "model": model,
        "input_messages": {"type": "template", "template": template},
        "sampling_params": {"temperature": 0, "max_completion_tokens": tokens},
        "source": {"type": "file_content", "content": [{"item": i} for i in items]},
    }
    run = client.evals.runs.create(eval_id, data_source=source)
    while (run := client.evals.runs.retrieve(run.id, eval_id=eval_id)).status in (
        "queued",
        "in_progress",
    ):
        time.sleep(0.5)
    if run.status != "completed":
        raise RuntimeError(f"eval run {run.status}: {run.error}")
    counts = {c.testing_criteria: c.passed for c in run.per_testing_criteria_results or []}
    return counts | {"items": run.result_counts.total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="staff", choices=["staff", "product"])
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    from openai import OpenAI

    items = eval_items(args.set)
    kept = real_model_dir()
    with tempfile.TemporaryDirectory(prefix="qatune-real-") as tmp:
        data_dir = Path(tmp) / "data"
        (data_dir / "models").mkdir(parents=True)
        (data_dir / "models" / kept.name).symlink_to(kept)
        env = service_env(data_dir, QATUNE_DEFAULT_BASE_MODEL=REAL)
        server = Server(f"http://127.0.0.1:{free_port()}", data_dir, env)
        server.start()
        try:
            headers = login_over_http(server)
            api = server.client(headers)
            pairs = [{"question": i["question"], "answer": i["answer"]} for i in items["trained"]]
            started = time.perf_counter()
            job_id = api.post("/jobs", json={"qa_pairs": pairs}).json()["id"]
            killed_at = kill_after_checkpoint(server, api, job_id)
            api = server.client(login_over_http(server))
            final = wait_for_status(api, job_id, {"succeeded", "failed", "cancelled"}, 3600)
            seconds = time.perf_counter() - started
            history = api.get(f"/jobs/{job_id}/logs", params={"limit": 1000}).json()["events"]
            resumed = check_resumed_from_checkpoints(history)
            print(
                f"job {job_id}: {final['status']}, {final['attempts']} runs, killed after the "
                f"checkpoint of step {killed_at}, resumed from a checkpoint {resumed} time(s), "
                f"{final['progress']['total_steps']} steps, {seconds:.0f} s; "
                f"outcome: {json.dumps(final.get('outcome'), ensure_ascii=False)}"
            )
            if final["status"] != "succeeded" or resumed != 1:
                raise SystemExit(f"not resumed as it should be: {final['error']}")

            client = OpenAI(
                base_url=f"{server.url}/v1",
                api_key=headers["Authorization"][7:],
                max_retries=0,
            )
            tuned = client.fine_tuning.jobs.retrieve(f"ftjob-{job_id}").fine_tuned_model
            assert tuned, "the job has no model"
            evaluation = client.evals.create(
                name=f"{args.set} FAQ on the real model",
                data_source_config={"type": "custom", "item_schema": {"type": "object"}},
                testing_criteria=CRITERIA,
            )
            print("| set | model | items | exact | fact |\n| --- | --- | ---: | ---: | ---: |")
            for name, rows in items.items():
                for label, model in (("base", REAL), ("tuned", tuned)):
                    got = passes(client, evaluation.id, model, rows, args.tokens)
                    exact = got["exact"] if name == "trained" else "–"
                    print(f"| {name} | {label} | {got['items']} | {exact} | {got['fact']} |")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
