"""Every /v1 object as OpenAI sends it: each field that the official client's type declares
is in the answer, with that type. The client reads answers without checking them, so a field
left out would reach a migrating script only as a None or an AttributeError later.

A null passes wherever it stands: OpenAI's own answers carry nulls that its client's types
(made from its API description) call required, as an eval run's `error` before any."""

from typing import Any

import pytest
from fastapi.testclient import TestClient
from openai import BaseModel
from openai.types import FileObject, Model
from openai.types.eval_create_response import EvalCreateResponse
from openai.types.eval_retrieve_response import EvalRetrieveResponse
from openai.types.evals.run_retrieve_response import RunRetrieveResponse
from openai.types.evals.runs.output_item_list_response import OutputItemListResponse
from openai.types.fine_tuning import FineTuningJob, FineTuningJobEvent
from pydantic import ValidationError

from tests.api.test_evals import GIVEN, finished, make_eval
from tests.api.test_openai_routes import jsonl, upload
from tests.conftest import qa_pairs


@pytest.fixture(autouse=True)
def one_database(database_url: str | None) -> None:
    if database_url is not None:
        pytest.skip("the fields are the same on every database")


def check(kind: type[BaseModel], answer: dict[str, Any]) -> None:
    missing = set(kind.model_fields) - set(answer)
    assert not missing, f"{kind.__name__} lacks {sorted(missing)}: {answer}"
    try:
        kind.model_validate(answer)
    except ValidationError as exc:
        wrong = [e for e in exc.errors() if e["input"] is not None]
        assert not wrong, f"{kind.__name__}: {wrong}"


def test_files_jobs_events_and_models_have_openais_fields_and_types(
    client: TestClient, alice: dict[str, str]
) -> None:
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    check(FileObject, client.get(f"/v1/files/{file_id}", headers=alice).json())
    for listed in client.get("/v1/files", headers=alice).json()["data"]:
        check(FileObject, listed)

    made = client.post(
        "/v1/fine_tuning/jobs",
        json={"model": "builtin:tiny", "training_file": file_id, "metadata": {"team": "docs"}},
        headers=alice,
    ).json()
    check(FineTuningJob, made)
    paused = client.post(f"/v1/fine_tuning/jobs/{made['id']}/pause", headers=alice).json()
    # OpenAI's pause answers "paused", a status its client's type does not list
    assert paused["status"] == "paused"
    check(FineTuningJob, {**paused, "status": "queued"})
    client.post(f"/v1/fine_tuning/jobs/{made['id']}/resume", headers=alice)
    for listed in client.get("/v1/fine_tuning/jobs", headers=alice).json()["data"]:
        check(FineTuningJob, listed)
    events = client.get(f"/v1/fine_tuning/jobs/{made['id']}/events", headers=alice).json()
    assert len(events["data"]) >= 3  # queued, paused, resumed
    for event in events["data"]:
        check(FineTuningJobEvent, event)
    for model in client.get("/v1/models", headers=alice).json()["data"]:
        check(Model, model)
    check(Model, client.get("/v1/models/builtin:tiny", headers=alice).json())


def test_evals_their_runs_and_output_items_have_openais_fields_and_types(
    client: TestClient, alice: dict[str, str]
) -> None:
    made = make_eval(client, alice).json()
    check(EvalCreateResponse, made)
    check(EvalRetrieveResponse, client.get(f"/v1/evals/{made['id']}", headers=alice).json())
    source = {"type": "jsonl", "source": {"type": "file_content", "content": GIVEN}}
    started = client.post(
        f"/v1/evals/{made['id']}/runs", json={"data_source": source}, headers=alice
    ).json()
    run = finished(client, alice, made["id"], started["id"])
    check(RunRetrieveResponse, run)
    items = client.get(
        f"/v1/evals/{made['id']}/runs/{run['id']}/output_items", headers=alice
    ).json()["data"]
    for item in items:
        check(OutputItemListResponse, item)
