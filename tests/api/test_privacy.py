"""Another user's things, asked for through every operation that names one: never there.

Each operation of the OpenAPI document with an id in its path is called by bob with the
ids of alice's dataset (a file), job, API key, eval, run and output item. The answer is a
404 (403 where only admins may act at all), or the 422 (400 under /v1) of a body that
is not valid, which is said before anything is looked up:
nothing that tells bob the thing exists, and nothing changed on alice's side."""

import re
from typing import Any

from fastapi.testclient import TestClient

from tests.api.test_evals import GIVEN, finished, make_eval
from tests.conftest import qa_pairs

HIDDEN = {403, 404}


def alices_things(client: TestClient, alice: dict[str, str]) -> dict[str, Any]:
    """What stands in for each path parameter: one of alice's things."""
    content = "".join(
        f'{{"question": "{p["question"]}", "answer": "{p["answer"]}"}}\n' for p in qa_pairs()[:4]
    )
    file_id = client.post(
        "/v1/files",
        files={"file": ("faq.jsonl", content.encode())},
        data={"purpose": "fine-tune"},
        headers=alice,
    ).json()["id"]
    number = int(file_id.removeprefix("file-"))
    job = client.post("/jobs", json={"dataset_id": number}, headers=alice).json()
    key = client.post("/api-keys", json={"name": "ci"}, headers=alice).json()
    eval_id = make_eval(client, alice).json()["id"]
    source = {"type": "jsonl", "source": {"type": "file_content", "content": GIVEN}}
    started = client.post(f"/v1/evals/{eval_id}/runs", json={"data_source": source}, headers=alice)
    run_id = finished(client, alice, eval_id, started.json()["id"])["id"]
    items = client.get(f"/v1/evals/{eval_id}/runs/{run_id}/output_items", headers=alice).json()
    me = client.get("/auth/me", headers=alice).json()
    return {
        "dataset_id": number,
        "file_id": file_id,
        "job_id": job["id"],
        "job_name": f"ftjob-{job['id']}",
        "key_id": key["id"],
        "eval_id": eval_id,
        "run_id": run_id,
        "item_id": items["data"][0]["id"],
        "user_id": me["id"],
        "model": f"ft:builtin:tiny:alice::ftjob-{job['id']}",
    }


def test_no_operation_reaches_another_users_things(
    client: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    things = alices_things(client, alice)
    before = {
        path: client.get(path, headers=alice).json()
        for path in ("/datasets", "/jobs", "/api-keys", "/v1/evals")
    }
    document = client.get("/openapi.json").json()
    checked = 0
    for path, operations in document["paths"].items():
        names = re.findall(r"\{([^}:]+)[^}]*\}", path)
        if not names:
            continue
        url = path
        for name in names:
            url = re.sub(r"\{" + name + r"[^}]*\}", str(things[name]), url)
        for method in operations:
            response = client.request(method.upper(), url, json={}, headers=bob)
            if response.status_code in (400, 422):
                error = response.json()
                said = error["error"]["message"] if "error" in error else error["detail"]
                assert said.startswith("Invalid request"), (method, url, said)
            else:
                assert response.status_code in HIDDEN, (method, url, response.text)
            checked += 1
    assert checked >= 40
    after = {path: client.get(path, headers=alice).json() for path in before}
    assert after == before  # bob's deletes, cancels and edits changed nothing of alice's
