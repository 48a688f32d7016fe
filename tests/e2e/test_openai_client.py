"""The official `openai` client against a live server: a fine-tuning script runs unchanged."""

import json
import time
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.api.test_openai_types import check
from tests.conftest import Server, login_over_http, make_user_over_http, qa_pairs, unique

pytestmark = pytest.mark.slow
SYSTEM = "You answer questions about this project's test data."


def chat_file(pairs: list[dict[str, str]]) -> bytes:
    """The records as OpenAI's fine-tuning format has them: system, user, assistant."""
    lines = []
    for pair in pairs:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": pair["question"]},
            {"role": "assistant", "content": pair["answer"]},
        ]
        lines.append(json.dumps({"messages": messages}, ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode()


def api_key(server: Server, username: str, password: str) -> str:
    headers = login_over_http(server, username, password)
    made = httpx.post(
        f"{server.url}/api-keys", json={"name": "openai script"}, headers=headers, timeout=30
    )
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def users_client(server: Server, name: str) -> OpenAI:
    """The official client of a user made now (password `{name}-kettle-marble-57`), with an
    API key of theirs."""
    make_user_over_http(server, login_over_http(server), name)
    key = api_key(server, name, f"{name}-kettle-marble-57")
    return OpenAI(base_url=f"{server.url}/v1", api_key=key)


def wait_for(client: OpenAI, job_id: str, statuses: set[str], timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        job = client.fine_tuning.jobs.retrieve(job_id)
        if job.status in statuses:
            return job
        assert time.monotonic() < deadline, f"{job_id} still {job.status}"
        time.sleep(0.5)


def as_openai_types(*objects: Any) -> None:
    """Each object as OpenAI sends it (tests/api/test_openai_types.py): every field its type
    in the client declares is there, with that type."""
    for found in objects:
        check(type(found), found.to_dict(mode="json"))


def test_a_fine_tuning_script_runs_unchanged_with_the_official_client(
    shared_server: Server,
) -> None:
    server = shared_server
    alice, bob_name = unique("alice"), unique("bob")
    client, bob = users_client(server, alice), users_client(server, bob_name)

    # Upload, in OpenAI's chat format, with a system message (8 pairs: one step an epoch;
    # what is asked of the job here is its course, not its answers).
    content = chat_file(qa_pairs()[:8])
    uploaded = client.files.create(file=("faq.jsonl", content), purpose="fine-tune")
    assert uploaded.id.startswith("file-") and uploaded.object == "file"
    assert (uploaded.bytes, uploaded.filename, uploaded.status) == (
        len(content),
        "faq.jsonl",
        "processed",
    )
    assert client.files.retrieve(uploaded.id).purpose == "fine-tune"
    as_openai_types(uploaded, client.files.retrieve(uploaded.id))
    assert client.files.content(uploaded.id).read() == content
    assert uploaded.id in [f.id for f in client.files.list(purpose="fine-tune")]

    # Train, and follow the job as a script would.
    job = client.fine_tuning.jobs.create(
        model="builtin:tiny",
        training_file=uploaded.id,
        suffix="faq",
        seed=7,
        metadata={"team": "docs"},
        method={"type": "supervised", "supervised": {"hyperparameters": {"n_epochs": 25}}},
    )
    assert job.id.startswith("ftjob-") and job.status in ("queued", "running")
    assert (job.model, job.training_file, job.seed, job.metadata) == (
        "builtin:tiny",
        uploaded.id,
        7,
        {"team": "docs"},
    )
    done = wait_for(client, job.id, {"succeeded", "failed", "cancelled"})
    assert done.status == "succeeded", done.error
    model = f"ft:builtin:tiny:{alice}:faq:{job.id}"
    assert done.fine_tuned_model == model and done.trained_tokens > 0
    assert done.hyperparameters.n_epochs == 25 and done.finished_at >= done.created_at
    as_openai_types(job, done)

    # Every event, page by page (auto-pagination follows `after` until has_more is false).
    events = list(client.fine_tuning.jobs.list_events(job.id, limit=7))
    native = httpx.get(
        f"{server.url}/jobs/{job.id.removeprefix('ftjob-')}/logs",
        params={"limit": 1000},
        headers={"Authorization": f"Bearer {client.api_key}"},
    ).json()["events"]
    assert len(events) == len(native) > 7  # the same job, seen from both APIs
    seqs = [int(e.id.rsplit("-", 1)[1]) for e in events]
    assert seqs == sorted(set(seqs), reverse=True)  # newest first, each once
    metrics = [e for e in events if e.type == "metrics"]
    assert metrics and isinstance(metrics[0].data, dict)
    assert {"step", "train_loss"} <= set(metrics[0].data)
    checkpoints = list(client.fine_tuning.jobs.checkpoints.list(job.id))
    assert checkpoints and checkpoints[0].fine_tuned_model_checkpoint.startswith(model + ":ckpt")
    as_openai_types(*events, *checkpoints)

    # The trained model is a model.
    models = list(client.models.list())
    ids = [m.id for m in models]
    assert "builtin:tiny" in ids and model in ids
    assert client.models.retrieve(model).owned_by == alice
    as_openai_types(*models, client.models.retrieve(model))

    # A second and a third job: cancel one, pause and resume the other.
    second = client.fine_tuning.jobs.create(
        model="builtin:tiny", training_file=uploaded.id, hyperparameters={"n_epochs": 100}
    )
    third = client.fine_tuning.jobs.create(model="builtin:tiny", training_file=uploaded.id)
    assert client.fine_tuning.jobs.pause(third.id).status == "paused"  # queued: held back
    wait_for(client, second.id, {"running"}, timeout=60)
    client.fine_tuning.jobs.cancel(second.id)
    assert wait_for(client, second.id, {"cancelled", "failed"}, timeout=60).status == "cancelled"
    assert client.fine_tuning.jobs.resume(third.id).status == "queued"
    jobs = list(client.fine_tuning.jobs.list(limit=1))  # across three pages
    assert [j.id for j in jobs] == [third.id, second.id, job.id]
    as_openai_types(*jobs)
    client.fine_tuning.jobs.cancel(third.id)

    # Another user sees none of it.
    with pytest.raises(openai.NotFoundError):
        bob.fine_tuning.jobs.retrieve(job.id)
    with pytest.raises(openai.NotFoundError):
        bob.models.retrieve(model)
    assert model not in [m.id for m in bob.models.list()]

    # Deleting the model removes it; the job stays.
    deleted = client.models.delete(model)
    assert (deleted.id, deleted.deleted) == (model, True)
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve(model)
    assert client.fine_tuning.jobs.retrieve(job.id).fine_tuned_model is None


def test_every_error_is_the_clients_own_exception(shared_server: Server) -> None:
    server = shared_server
    admin = login_over_http(server)
    key = httpx.post(f"{server.url}/api-keys", json={"name": "e"}, headers=admin).json()["key"]
    client = OpenAI(base_url=f"{server.url}/v1", api_key=key)

    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=f"{server.url}/v1", api_key="qk-not-a-key").models.list()
    with pytest.raises(openai.NotFoundError):
        client.fine_tuning.jobs.retrieve("ftjob-999999")
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve("file-999999")
    with pytest.raises(openai.BadRequestError, match="line 2") as bad_file:
        client.files.create(
            file=("bad.jsonl", b'{"question": "q", "answer": "a"}\n{"question": "only"}\n'),
            purpose="fine-tune",
        )
    assert bad_file.value.body["param"] == "file"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="purpose"):
        client.files.create(file=("x.jsonl", b"{}"), purpose="batch")
    with pytest.raises(openai.BadRequestError) as unknown_file:
        client.fine_tuning.jobs.create(model="builtin:tiny", training_file="file-424242")
    assert unknown_file.value.body["param"] == "training_file"  # type: ignore[index]
    good = client.files.create(file=("ok.jsonl", chat_file(qa_pairs()[:3])), purpose="fine-tune")
    with pytest.raises(openai.BadRequestError, match="needs preference pairs") as not_dpo:
        client.fine_tuning.jobs.create(
            model="builtin:tiny", training_file=good.id, method={"type": "dpo"}
        )
    assert not_dpo.value.body["param"] == "method.type"  # type: ignore[index]
    with pytest.raises(
        openai.BadRequestError, match="needs method.reinforcement.grader"
    ) as no_grader:
        client.fine_tuning.jobs.create(
            model="builtin:tiny", training_file=good.id, method={"type": "reinforcement"}
        )
    assert no_grader.value.body["param"] == "method.reinforcement.grader"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="from 1 to 100") as zero_epochs:
        client.fine_tuning.jobs.create(
            model="builtin:tiny", training_file=good.id, hyperparameters={"n_epochs": 0}
        )
    assert zero_epochs.value.param == "hyperparameters.n_epochs"
    with pytest.raises(openai.PermissionDeniedError):
        client.models.delete("builtin:tiny")
    job = client.fine_tuning.jobs.create(model="builtin:tiny", training_file=good.id)
    client.fine_tuning.jobs.cancel(job.id)
    wait_for(client, job.id, {"cancelled"}, timeout=60)
    started = time.monotonic()
    with pytest.raises(openai.ConflictError):  # x-should-retry: false — no retries
        client.fine_tuning.jobs.cancel(job.id)
    assert time.monotonic() - started < 0.5
    # A field the job does not know is a 400 naming it, as OpenAI's API answers one: a
    # misspelt hyperparameter would otherwise run a job with its default.
    with pytest.raises(openai.BadRequestError) as unknown:
        client.fine_tuning.jobs.create(
            model="builtin:tiny", training_file=good.id, extra_body={"future_option": True}
        )
    assert unknown.value.param == "future_option"
