import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx2 import Response

from tests.conftest import QA_FILE, qa_pairs, tool_records


def create(client: TestClient, headers: dict[str, str], **body: object) -> Response:
    body.setdefault("qa_pairs", qa_pairs()[:4])
    return client.post("/jobs", json=body, headers=headers)


def test_create_with_inline_pairs_and_with_a_dataset(
    client: TestClient, alice: dict[str, str]
) -> None:
    job = create(client, alice, name="inline").json()
    assert job["status"] == "queued" and job["base_model"] == "builtin:tiny"
    assert job["num_examples"] == 4 and job["progress"]["percent"] == 0
    dataset = client.post(
        "/datasets", files={"file": ("qa.jsonl", QA_FILE.read_bytes())}, headers=alice
    ).json()
    from_dataset = client.post("/jobs", json={"dataset_id": dataset["id"]}, headers=alice)
    assert from_dataset.status_code == 201 and from_dataset.json()["num_examples"] == 30
    page = client.get("/jobs", headers=alice).json()
    assert page["total"] == 2 and [j["id"] for j in page["items"]] == [
        from_dataset.json()["id"],
        job["id"],
    ]
    logs = client.get(f"/jobs/{job['id']}/logs", headers=alice).json()
    assert logs["events"][0]["message"].startswith("Job queued") and logs["next_after"] == 1


def test_out_of_range_hyperparameters_name_the_field(
    client: TestClient, alice: dict[str, str]
) -> None:
    response = create(
        client,
        alice,
        hyperparameters={"epochs": 0, "learning_rate": 5, "lora_dropout": 1.5, "warmup": 3},
    )
    assert response.status_code == 422
    fields = {e["field"] for e in response.json()["errors"]}
    assert {
        "hyperparameters.epochs",
        "hyperparameters.learning_rate",
        "hyperparameters.lora_dropout",
        "hyperparameters.warmup",
    } <= fields


def test_lora_layers_the_base_does_not_have_are_refused_at_creation(
    client: TestClient, alice: dict[str, str]
) -> None:
    """Once queued and failed in the worker ("Target modules … not found"), and a misspelt
    name among right ones trained fewer layers without a word; the base's own names are
    given instead. peft's rule: the name, or the end of one."""
    for targets, missing in (
        (["nonexistent_proj"], "nonexistent_proj"),
        (["q_proj", "v_prj"], "v_prj"),
    ):
        response = create(client, alice, hyperparameters={"lora_target_modules": targets})
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith(
            f"lora_target_modules: {missing} is not a layer of builtin:tiny; its layers are "
            "down_proj, embed_tokens, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, "
            'v_proj, or give "all-linear"'
        )
        assert response.json()["errors"][0]["field"] == "hyperparameters.lora_target_modules"
    assert client.get("/jobs", headers=alice).json()["total"] == 0
    for targets in (["q_proj", "v_proj"], ["self_attn.q_proj"], ["model.layers.0.mlp.up_proj"]):
        response = create(client, alice, hyperparameters={"lora_target_modules": targets})
        assert response.status_code == 201, response.text


def test_bad_job_bodies(client: TestClient, alice: dict[str, str]) -> None:
    both = client.post("/jobs", json={"dataset_id": 1, "qa_pairs": qa_pairs()[:1]}, headers=alice)
    assert both.status_code == 422 and "exactly one" in both.json()["detail"]
    assert client.post("/jobs", json={"dataset_id": 999}, headers=alice).status_code == 404
    bad_pairs = create(client, alice, qa_pairs=[{"question": "q"}])
    assert bad_pairs.status_code == 422 and bad_pairs.json()["errors"][0]["item"] == 1
    path = create(client, alice, base_model="/etc")
    assert path.status_code == 403 and "admins" in path.json()["detail"]
    missing = create(client, alice, base_model="/no/such/dir")
    assert missing.json()["detail"] == path.json()["detail"]  # nothing about what exists
    junk = create(client, alice, base_model="not a model")
    assert junk.status_code == 422


def test_cancel_queued_job_and_delete(client: TestClient, alice: dict[str, str], app_env) -> None:  # type: ignore[no-untyped-def]
    job_id = create(client, alice).json()["id"]
    assert client.delete(f"/jobs/{job_id}", headers=alice).status_code == 409
    cancelled = client.post(f"/jobs/{job_id}/cancel", headers=alice).json()
    assert cancelled["status"] == "cancelled" and cancelled["finished_at"]
    again = client.post(f"/jobs/{job_id}/cancel", headers=alice)
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]
    query = client.post(f"/jobs/{job_id}/query", json={"question": "q"}, headers=alice)
    assert query.status_code == 409 and "cancelled" in query.json()["detail"]
    evaluation = client.get(f"/jobs/{job_id}/evaluation", headers=alice)
    assert evaluation.status_code == 409 and "cancelled" in evaluation.json()["detail"]
    assert client.delete(f"/jobs/{job_id}", headers=alice).status_code == 204
    assert client.get(f"/jobs/{job_id}", headers=alice).status_code == 404
    assert not list((app_env / "jobs").iterdir())


def test_jobs_are_private_to_their_owner(
    client: TestClient, alice: dict[str, str], bob: dict[str, str], admin_headers: dict[str, str]
) -> None:
    job_id = create(client, alice).json()["id"]
    for method, path in [
        ("GET", f"/jobs/{job_id}"),
        ("GET", f"/jobs/{job_id}/logs"),
        ("POST", f"/jobs/{job_id}/cancel"),
        ("DELETE", f"/jobs/{job_id}"),
        ("GET", f"/jobs/{job_id}/logs/stream"),
        ("GET", f"/jobs/{job_id}/adapter"),
        ("GET", f"/jobs/{job_id}/evaluation"),
    ]:
        assert client.request(method, path, headers=bob).status_code == 404, path
    query = client.post(f"/jobs/{job_id}/query", json={"question": "q"}, headers=bob)
    assert query.status_code == 404
    assert client.get("/jobs", headers=bob).json()["total"] == 0
    everyone = client.get("/jobs", headers=admin_headers).json()
    assert everyone["items"][0]["owner"] == "alice"


def test_a_queued_job_says_its_place_in_a_line_that_takes_users_in_turn(
    client: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    """Alice's three jobs do not hold Bob's back: his first job runs second."""
    alices = [create(client, alice).json() for _ in range(3)]
    bobs = create(client, bob).json()
    assert [job["jobs_ahead"] for job in alices] == [0, 1, 2]
    assert bobs["jobs_ahead"] == 1
    listed = {j["id"]: j["jobs_ahead"] for j in client.get("/jobs", headers=alice).json()["items"]}
    assert listed == {alices[0]["id"]: 0, alices[1]["id"]: 2, alices[2]["id"]: 3}
    assert client.get(f"/jobs/{bobs['id']}", headers=bob).json()["jobs_ahead"] == 1
    cancelled = client.post(f"/jobs/{alices[0]['id']}/cancel", headers=alice).json()
    assert cancelled["jobs_ahead"] is None  # only a queued job has a place
    # she has had no turn yet: her next job, asked for before Bob's, is first
    assert client.get(f"/jobs/{alices[1]['id']}", headers=alice).json()["jobs_ahead"] == 0
    assert client.get(f"/jobs/{bobs['id']}", headers=bob).json()["jobs_ahead"] == 1


def test_a_queued_job_says_about_when_it_starts(
    client: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    """No job runs here (no worker): the first in line starts now, and each after it when
    the jobs before it are estimated to have run, as the estimate said for each."""
    made = [create(client, user).json() for user in (alice, alice, bob)]
    first, second, bobs = (job["estimated_run_seconds"] for job in made)
    assert first > 0 and second > 0 and bobs > 0  # this machine's speed: no job ran yet
    listed = client.get("/jobs", headers=alice).json()["items"]
    starts = {job["id"]: job["starts_in_seconds"] for job in listed}
    assert starts[made[0]["id"]] == 0  # then Bob's (a turn per user), then her second
    bob_starts = client.get(f"/jobs/{made[2]['id']}", headers=bob).json()["starts_in_seconds"]
    assert bob_starts == pytest.approx(first, abs=0.1)
    assert starts[made[1]["id"]] == pytest.approx(first + bobs, abs=0.2)
    client.post(f"/jobs/{made[0]['id']}/cancel", headers=alice)
    assert client.get(f"/jobs/{made[1]['id']}", headers=alice).json()["starts_in_seconds"] == 0


def test_status_filter_and_paging(client: TestClient, alice: dict[str, str]) -> None:
    ids = [create(client, alice).json()["id"] for _ in range(3)]
    client.post(f"/jobs/{ids[0]}/cancel", headers=alice)
    assert client.get("/jobs?status=cancelled", headers=alice).json()["total"] == 1
    page = client.get("/jobs?limit=1&offset=1", headers=alice).json()
    assert page["total"] == 3 and [j["id"] for j in page["items"]] == [ids[1]]
    assert client.get("/jobs?status=bogus", headers=alice).status_code == 422


def test_models_and_device(client: TestClient, alice: dict[str, str]) -> None:
    models = client.get("/models", headers=alice).json()
    assert models["base_models"][0]["name"] == "builtin:tiny"
    device = client.get("/system/device", headers=alice).json()
    assert device["device"] == "cpu" and device["precision"] in ("bf16", "fp32")
    assert device["memory_budget_gb"] > 0 and device["reasons"]


def test_gradient_checkpointing_is_a_json_boolean_as_the_estimate_answers_it(
    client: TestClient, alice: dict[str, str]
) -> None:
    """Sent as the estimate says it (true), and as it was first written ("true")."""
    for asked, planned in ((True, True), (False, False), ("true", True), ("false", False)):
        body = {"qa_pairs": qa_pairs(), "hyperparameters": {"gradient_checkpointing": asked}}
        estimate = client.post("/jobs/estimate", json=body, headers=alice)
        assert estimate.status_code == 200, estimate.text
        assert estimate.json()["gradient_checkpointing"] is planned
    made = client.post("/jobs", json=body, headers=alice).json()
    assert made["hyperparameters"]["gradient_checkpointing"] is False
    refused = client.post(
        "/jobs/estimate",
        json={"qa_pairs": qa_pairs(), "hyperparameters": {"gradient_checkpointing": "sometimes"}},
        headers=alice,
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["message"].endswith('give true or false, or "auto"')


def test_estimate_here_and_for_another_machine(client: TestClient, alice: dict[str, str]) -> None:
    here = client.post("/jobs/estimate", json={"qa_pairs": qa_pairs()}, headers=alice).json()
    for key in (
        "fits",
        "estimated_peak_gb",
        "memory_budget_gb",
        "precision",
        "micro_batch_size",
        "gradient_accumulation_steps",
        "gradient_checkpointing",
        "reasons",
    ):
        assert key in here, key
    assert here["fits"] and here["device"] == "cpu"
    # Before any job on the model, a rough time from this CPU's speed; auto epochs count
    # a typical set's epochs, not the cap (30 pairs of qa30: ~2,000 tokens an epoch,
    # builtin:tiny at about 4,000 tokens a second here: tens of seconds, not minutes)
    assert here["estimated_from"] == "matrix_speed"
    assert here["hyperparameters"]["until_learned"] and here["hyperparameters"]["epochs"] > 24
    assert 1 < here["estimated_seconds"] < 120
    assert here["estimated_run_seconds"] == here["estimated_seconds"]  # nothing else known
    big = {
        "qa_pairs": qa_pairs(),
        "base_model": "Qwen/Qwen2.5-7B-Instruct",
        "target": {"device": "mps", "memory_gb": 8},
    }
    small_mac = client.post("/jobs/estimate", json=big, headers=alice).json()
    # A 7B model on an 8 GB Mac: only on a 4-bit base (bitsandbytes assumed there)
    assert small_mac["fits"] and small_mac["quantization"] == "4bit"
    assert small_mac["hyperparameters"]["quantization"] == "4bit"
    assert small_mac["reasons"][1].startswith("base in 4-bit (NF4): as stored (fp16) needs")
    big["hyperparameters"] = {"quantization": "none"}
    unquantized = client.post("/jobs/estimate", json=big, headers=alice).json()
    assert not unquantized["fits"] and "smaller base model" in unquantized["advice"]
    assert "a 4-bit base (quantization 4bit)" in unquantized["advice"]
    del big["hyperparameters"]
    big["target"] = {"device": "cuda", "memory_gb": 80}
    assert client.post("/jobs/estimate", json=big, headers=alice).json()["fits"]
    unknown = client.post(
        "/jobs/estimate",
        json={"qa_pairs": qa_pairs(), "base_model": "someone/unknown-model"},
        headers=alice,
    )
    assert unknown.status_code == 404 and "shape is unknown" in unknown.json()["detail"]


def test_a_job_that_cannot_fit_is_refused_at_creation(
    client: TestClient, alice: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    tiny_machine = replace(runtime.device_plan, memory_budget_gb=1.6)
    monkeypatch.setitem(runtime.__dict__, "device_plan", tiny_machine)
    response = create(client, alice, base_model="Qwen/Qwen2.5-7B-Instruct")
    assert response.status_code == 409  # a valid request this machine cannot carry out
    assert "Does not fit" in response.json()["detail"]
    assert client.get("/jobs", headers=alice).json()["total"] == 0


def test_a_quantization_this_machine_cannot_do_is_a_400_with_the_install_command(
    client: TestClient, alice: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    plan = runtime.device_plan
    without = replace(plan, capabilities=replace(plan.capabilities, bitsandbytes=None))
    monkeypatch.setitem(runtime.__dict__, "device_plan", without)
    response = create(client, alice, hyperparameters={"quantization": "4bit"})
    assert response.status_code == 400
    body = response.json()
    assert body["detail"].startswith("quantization: 4bit is not available on cpu")
    assert "pip install 'bitsandbytes>=0.50'" in body["detail"]
    assert body["errors"][0]["field"] == "hyperparameters.quantization"
    assert client.get("/jobs", headers=alice).json()["total"] == 0
    # auto never asks for what is not here
    assert create(client, alice, hyperparameters={"quantization": "auto"}).status_code == 201


def test_a_conversation_longer_than_the_model_reads_is_refused_at_creation(
    client: TestClient, alice: dict[str, str]
) -> None:
    long_turns = [
        {"role": role, "content": f"{role} says " + "words and more words " * 900}
        for _ in range(3)
        for role in ("user", "assistant")
    ]
    record = {"messages": [*long_turns, {"role": "user", "content": "q"}, {"role": "assistant",
              "content": "a"}]}  # fmt: skip
    refused = create(client, alice, qa_pairs=[*qa_pairs()[:2], record])
    assert refused.status_code == 422, refused.text
    assert "reads (2048 tokens)" in refused.json()["detail"]
    problem = refused.json()["errors"][-1]
    assert problem["item"] >= 3 and "tokens with the answer to 'q'" in problem["message"]
    assert client.get("/jobs", headers=alice).json()["total"] == 0  # nothing was made


def test_tool_records_on_a_base_that_writes_no_tools_are_refused_naming_them(
    client: TestClient, alice: dict[str, str]
) -> None:
    refused = create(client, alice, qa_pairs=[*qa_pairs()[:2], *tool_records()[:2]])
    assert refused.status_code == 422, refused.text
    assert "the chat template of builtin:tiny writes no tools" in refused.json()["detail"]
    assert [e["item"] for e in refused.json()["errors"]] == [3, 4, 5]
    assert "'What is the weather in Paris?'" in refused.json()["errors"][0]["message"]
    assert client.get("/jobs", headers=alice).json()["total"] == 0


def test_records_a_base_models_template_refuses_are_named_at_creation(
    client: TestClient, admin_headers: dict[str, str], tool_model: Path, tmp_path: Path
) -> None:
    """A template's own rule (Gemma's: no system role) is the job's 422, naming the item."""
    strict = tmp_path / "no-system"
    shutil.copytree(tool_model, strict)
    (strict / "chat_template.jinja").write_text(
        "{% for m in messages %}{% if m.role == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    system = {"messages": [{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "Hours?"},
                           {"role": "assistant", "content": "9 to 5."}]}  # fmt: skip
    refused = create(client, admin_headers, base_model=str(strict),
                     qa_pairs=[*qa_pairs()[:2], system])  # fmt: skip
    assert refused.status_code == 422, refused.text
    assert "refuses 1 examples" in refused.json()["detail"]
    assert refused.json()["errors"] == [
        {"item": 3, "field": "messages", "message": "System role not supported"}
    ]
    assert create(client, admin_headers, base_model=str(strict)).status_code == 201


def test_the_method_follows_the_data_and_a_mismatch_says_what_to_change(
    client: TestClient, alice: dict[str, str]
) -> None:
    preference = {
        "input": {"messages": [{"role": "user", "content": "Opening hours?"}]},
        "preferred_output": [{"role": "assistant", "content": "9 to 5."}],
        "non_preferred_output": [{"role": "assistant", "content": "Sometimes."}],
    }
    dpo = create(client, alice, qa_pairs=[preference], hyperparameters={"beta": 0.2})
    assert dpo.status_code == 201 and dpo.json()["method"] == "dpo", dpo.text
    plain = create(client, alice, qa_pairs=qa_pairs()[:1], method="dpo")
    # Each body is valid alone: what conflicts is the data it names (409, saying what to do).
    assert plain.status_code == 409 and "example 1 has no non-preferred" in plain.json()["detail"]
    supervised = create(client, alice, qa_pairs=[preference], method="supervised")
    assert supervised.status_code == 409 and "method dpo" in supervised.json()["detail"]
    beta = create(client, alice, qa_pairs=qa_pairs()[:1], hyperparameters={"beta": 0.2})
    assert beta.status_code == 409 and beta.json()["errors"][0]["field"] == "hyperparameters.beta"


def test_a_long_jobs_curve_and_log_are_read_in_pieces(
    client: TestClient, alice: dict[str, str]
) -> None:
    """GET /jobs/{id}/series averages the progress events' figures in the database into at
    most `points` buckets; GET /jobs/{id}/logs?before= reads the log backwards."""
    from sqlalchemy import func, select

    from app.core.language import said
    from app.db.models import Job, JobCurvePoint
    from app.ml.events import Progress
    from app.ml.memory import MemorySnapshot
    from app.services.jobs.lifecycle import add_event

    job_id = create(client, alice).json()["id"]
    database = client.app.state.runtime.database  # type: ignore[attr-defined]
    with database.session() as session:
        job = session.get(Job, job_id)
        for step in range(1, 301):
            add_event(session, job, "INFO", said("a line"))
            progress = Progress(
                step=step, total_steps=300, epoch=step / 10, loss=float(step), learning_rate=1e-4,
                tokens_per_second=1.0, eta_seconds=1.0, memory=MemorySnapshot(rss_mb=1.0),
                reward_margin=0.5 if step > 150 else None,
            )  # fmt: skip
            add_event(session, job, "INFO", said("step {step}", step=step), progress)
            session.flush()
    series = client.get(f"/jobs/{job_id}/series", params={"points": 10}, headers=alice).json()
    assert series["steps_read"] == 300 and len(series["points"]) == 10
    assert series["latest"]["step"] == 300 and series["through"] == 601  # 1 is "Job queued"
    first, last = series["points"][0], series["points"][-1]
    assert (first["step"], first["loss"], first["reward_margin"]) == (30, 15.5, None)
    assert (last["step"], last["loss"], last["reward_margin"]) == (300, 285.5, 0.5)

    back = client.get(f"/jobs/{job_id}/logs", params={"before": 600, "limit": 3}, headers=alice)
    assert [e["seq"] for e in back.json()["events"]] == [597, 598, 599]

    client.post(f"/jobs/{job_id}/cancel", headers=alice)
    assert client.delete(f"/jobs/{job_id}", headers=alice).status_code == 204
    with database.session() as session:  # the curve went with its job
        assert session.scalar(select(func.count()).select_from(JobCurvePoint)) == 0


def test_a_jobs_default_name_says_its_method_origin_and_suffix(
    client: TestClient, alice: dict[str, str]
) -> None:
    from pathlib import Path

    from app.db.models import Job
    from app.services.jobs.lifecycle import default_name
    from app.services.jobs.lineage import StartingPoint

    assert create(client, alice).json()["name"] == "SFT on builtin:tiny, 4 pairs"
    named = create(client, alice, suffix="kiki").json()["name"]
    assert named == "kiki: SFT on builtin:tiny, 4 pairs"
    parent = Job(id=3, suffix="faq", base_model="builtin:tiny")
    start = StartingPoint(parent, None, Path("unused"), "ft:builtin:tiny:alice:faq:ftjob-3")
    assert default_name("dpo", "builtin:tiny", start, suffix="kiki", count=40) == (
        "kiki: DPO on faq (job 3), 40 preference pairs"
    )
    assert default_name("reinforcement", "Qwen/Qwen2.5-0.5B", None, suffix=None, count=9) == (
        "RFT on Qwen2.5-0.5B, 9 prompts"
    )
