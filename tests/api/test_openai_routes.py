"""/v1 over the ASGI app: one dataset seen from both APIs, cursor pages, OpenAI's errors."""

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import qa_pairs, tool_records


def upload(client: TestClient, headers: dict[str, str], name: str, content: bytes) -> str:
    made = client.post(
        "/v1/files",
        files={"file": (name, content)},
        data={"purpose": "fine-tune"},
        headers=headers,
    )
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def jsonl(pairs: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(p) + "\n" for p in pairs).encode()


def test_a_file_is_a_dataset_in_both_apis(
    client: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    content = jsonl(qa_pairs()[:4])
    file_id = upload(client, alice, "faq.jsonl", content)
    native = client.get(f"/datasets/{file_id.removeprefix('file-')}", headers=alice).json()
    assert native["name"] == "faq.jsonl" and native["num_examples"] == 4
    assert client.get(f"/v1/files/{file_id}/content", headers=alice).content == content
    # Not bob's: 404, in OpenAI's shape, from both APIs.
    missing = client.get(f"/v1/files/{file_id}", headers=bob)
    assert missing.status_code == 404 and set(missing.json()["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }
    assert missing.headers["x-should-retry"] == "false"
    assert client.get(f"/datasets/{native['id']}", headers=bob).status_code == 404
    deleted = client.delete(f"/v1/files/{file_id}", headers=alice).json()
    assert deleted == {"id": file_id, "object": "file", "deleted": True}
    assert client.get(f"/datasets/{native['id']}", headers=alice).status_code == 404


def test_files_come_in_pages_in_either_order(client: TestClient, alice: dict[str, str]) -> None:
    ids = [upload(client, alice, f"f{i}.jsonl", jsonl(qa_pairs()[:2])) for i in range(5)]
    seen: list[str] = []
    after = None
    while True:
        params: dict[str, str | int] = {"limit": 2, "order": "asc"}
        if after:
            params["after"] = after
        page = client.get("/v1/files", params=params, headers=alice).json()
        seen += [f["id"] for f in page["data"]]
        if not page["has_more"]:
            break
        after = page["data"][-1]["id"]
    assert seen == ids
    newest = client.get("/v1/files", params={"limit": 3}, headers=alice).json()
    assert [f["id"] for f in newest["data"]] == ids[::-1][:3] and newest["has_more"]


def test_a_bad_file_names_its_line_and_keeps_nothing(
    client: TestClient, alice: dict[str, str]
) -> None:
    bad = b'{"messages": [{"role": "assistant", "content": "a"}]}\n'
    answer = client.post(
        "/v1/files",
        files={"file": ("bad.jsonl", bad)},
        data={"purpose": "fine-tune"},
        headers=alice,
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "line 1" in error["message"] and error["param"] == "file"
    assert client.get("/v1/files", headers=alice).json()["data"] == []


def test_a_job_from_v1_is_a_native_job(client: TestClient, alice: dict[str, str]) -> None:
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    made = client.post(
        "/v1/fine_tuning/jobs",
        json={
            "model": "builtin:tiny",
            "training_file": file_id,
            "validation_file": file_id,
            "suffix": "faq",
            "hyperparameters": {"n_epochs": 3, "batch_size": "auto"},
        },
        headers=alice,
    )
    assert made.status_code == 200, made.text
    job = made.json()
    assert job["object"] == "fine_tuning.job" and job["status"] == "queued"
    assert job["validation_file"] == file_id and job["hyperparameters"]["n_epochs"] == 3
    native = client.get(f"/jobs/{job['id'].removeprefix('ftjob-')}", headers=alice).json()
    assert native["suffix"] == "faq" and native["status"] == "queued"
    assert native["hyperparameters"]["epochs"] == 3
    # A native job is an OpenAI job too.
    other = client.post("/jobs", json={"qa_pairs": qa_pairs()[:3]}, headers=alice).json()
    listed = client.get("/v1/fine_tuning/jobs", headers=alice).json()
    assert [j["id"] for j in listed["data"]] == [f"ftjob-{other['id']}", job["id"]]
    assert listed["data"][0]["training_file"] is None  # pairs posted inline: no file


def test_jobs_are_filtered_by_their_metadata(client: TestClient, alice: dict[str, str]) -> None:
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    made = {}
    for labels in ({"team": "docs"}, {"team": "docs", "env": "prod"}, {"team": "sales"},
                   {'odd "key"': "x"}, None):  # fmt: skip
        body = {"model": "builtin:tiny", "training_file": file_id}
        job = client.post("/v1/fine_tuning/jobs", json={**body, "metadata": labels}, headers=alice)
        assert job.status_code == 200, job.text
        made[json.dumps(labels)] = job.json()["id"]

    def listed(**labels: str) -> list[str]:
        query = {f"metadata[{k}]": v for k, v in labels.items()}
        page = client.get("/v1/fine_tuning/jobs", params=query, headers=alice).json()
        return [j["id"] for j in page["data"]]

    docs, both = made['{"team": "docs"}'], made['{"team": "docs", "env": "prod"}']
    assert listed(team="docs") == [both, docs]
    assert listed(team="docs", env="prod") == [both]
    assert listed(team="nobody") == []
    assert listed(**{'odd "key"': "x"}) == [made['{"odd \\"key\\"": "x"}']]


def test_function_calling_files_train_on_a_base_whose_template_writes_tools(
    client: TestClient, admin_headers: dict[str, str], tool_model: Path
) -> None:
    """A file of tools, calls and results is a fine-tuning file; a base whose chat template
    writes no tools refuses it with a 400 that names the records, one whose template does
    takes it (a server path: an admin's)."""
    file_id = upload(client, admin_headers, "tools.jsonl", jsonl(tool_records()))
    body = {"training_file": file_id, "hyperparameters": {"n_epochs": 1}}
    refused = client.post(
        "/v1/fine_tuning/jobs", json={**body, "model": "builtin:tiny"}, headers=admin_headers
    )
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert "5 examples use tools" in error["message"] and "writes no tools" in error["message"]
    assert client.get("/v1/fine_tuning/jobs", headers=admin_headers).json()["data"] == []
    made = client.post(
        "/v1/fine_tuning/jobs", json={**body, "model": str(tool_model)}, headers=admin_headers
    )
    assert made.status_code == 200, made.text
    native = client.get(f"/jobs/{made.json()['id'].removeprefix('ftjob-')}", headers=admin_headers)
    assert native.json()["num_examples"] == 15  # each call, each answer after a result


def test_the_quantized_base_is_a_qatune_extension_of_openais_hyperparameters(
    client: TestClient, alice: dict[str, str]
) -> None:
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    asked = {"quantization": "4bit"}
    method = {"type": "supervised", "supervised": {"hyperparameters": asked}}
    made = client.post(
        "/v1/fine_tuning/jobs",
        json={"model": "builtin:tiny", "training_file": file_id, "method": method},
        headers=alice,
    )
    assert made.status_code == 200, made.text
    assert made.json()["hyperparameters"]["quantization"] == "4bit"
    native = client.get(f"/jobs/{made.json()['id'].removeprefix('ftjob-')}", headers=alice)
    assert native.json()["hyperparameters"]["quantization"] == "4bit"
    asked["quantization"] = "2bit"
    wrong = client.post(
        "/v1/fine_tuning/jobs",
        json={"model": "builtin:tiny", "training_file": file_id, "method": method},
        headers=alice,
    )
    assert wrong.status_code == 400  # OpenAI's answer to every malformed field of the request
    error = wrong.json()["error"]
    assert error["param"] == "method.supervised.hyperparameters.quantization", error
    assert '"2bit" is not accepted' in error["message"] and '"4bit"' in error["message"], error


def test_a_field_or_model_that_is_not_here_is_a_400_saying_what_is(
    client: TestClient, alice: dict[str, str]
) -> None:
    """A misspelt field ran a job with defaults; OpenAI's model name answered with a regex."""
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    body = {"model": "builtin:tiny", "training_file": file_id}

    def refused(**changes: Any) -> dict[str, Any]:
        response = client.post("/v1/fine_tuning/jobs", json={**body, **changes}, headers=alice)
        assert response.status_code == 400, response.text
        return response.json()["error"]

    error = refused(hyperparameters={"n_epoch": 3})
    assert error["param"] == "hyperparameters.n_epoch"
    assert "did you mean n_epochs?" in error["message"]
    error = refused(method={"type": "supervised", "supervised": {"hyperparameter": {}}})
    assert "did you mean hyperparameters?" in error["message"]
    assert "did you mean suffix?" in refused(sufix="faq")["message"]
    for model in ("gpt-4o-mini-2024-07-18", "ft:gpt-4o-mini-2024-07-18:acme:faq:AbC123"):
        error = refused(model=model)
        assert error["param"] == "model", error
        assert "is OpenAI's model, which is not served here" in error["message"]
        assert "builtin:tiny" in error["message"] and "pattern" not in error["message"]
    error = refused(model="no such model!")
    assert "is not a model here; start from one of these: builtin:tiny" in error["message"]
    assert client.get("/v1/fine_tuning/jobs", headers=alice).json()["data"] == []  # none made


def test_a_name_is_a_number_only_in_the_digits_0_to_9(
    client: TestClient, alice: dict[str, str]
) -> None:
    """ "file-²" was a 500 (isdigit passes it, int refuses it), and "file-١" reached file-1."""
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    assert file_id == "file-1"
    for name in ("file-²", "file-١", "file-１", "file-+1", "file- 1", "file-"):
        response = client.get(f"/v1/files/{name}", headers=alice)
        assert response.status_code == 404, (name, response.text)
    for path in ("/v1/fine_tuning/jobs/ftjob-²", "/v1/evals/eval_²", "/v1/files?after=file-²"):
        assert client.get(path, headers=alice).status_code < 500, path
    assert client.get("/v1/files/file-1", headers=alice).status_code == 200


def test_a_file_or_job_not_found_is_named_as_openais_api_names_it(
    client: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    """Not there, not a name of its kind, or another user's: one 404, in /v1's names (it
    said "Dataset 9 not found; GET /datasets lists yours" where the name was well made)."""
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    job = client.post(
        "/v1/fine_tuning/jobs",
        json={"model": "builtin:tiny", "training_file": file_id},
        headers=alice,
    ).json()["id"]
    for method, path, headers, name in (
        ("GET", "/v1/files/file-999", alice, "file-999"),
        ("DELETE", "/v1/files/file-999", alice, "file-999"),
        ("GET", f"/v1/files/{file_id}/content", bob, file_id),
        ("GET", "/v1/files/ftjob-1", alice, "ftjob-1"),
    ):
        response = client.request(method, path, headers=headers)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"]["message"] == (
            f"No file '{name}' of yours; GET /v1/files lists them"
        )
    for method, path, headers, name in (
        ("GET", "/v1/fine_tuning/jobs/ftjob-999", alice, "ftjob-999"),
        ("POST", f"/v1/fine_tuning/jobs/{job}/cancel", bob, job),
        ("GET", "/v1/fine_tuning/jobs/job-1/events", alice, "job-1"),
    ):
        response = client.request(method, path, headers=headers)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"]["message"] == (
            f"No fine-tuning job '{name}' of yours; GET /v1/fine_tuning/jobs lists them"
        )


def test_a_cursor_that_is_not_an_id_of_the_list_is_a_400_not_the_first_page(
    client: TestClient, alice: dict[str, str]
) -> None:
    """A client following pages with a wrong `after` got the first page again, which it
    would read as the next one, and loop."""
    file_id = upload(client, alice, "faq.jsonl", jsonl(qa_pairs()[:4]))
    for _ in range(2):
        made = client.post(
            "/v1/fine_tuning/jobs",
            json={"model": "builtin:tiny", "training_file": file_id},
            headers=alice,
        )
        assert made.status_code == 200, made.text
    first, second = "ftjob-1", "ftjob-2"
    lists = {
        "/v1/files": ("file-x", "ftjob-1", "file-²"),
        "/v1/fine_tuning/jobs": ("ftjob-", "file-1", "job-1"),
        f"/v1/fine_tuning/jobs/{first}/events": ("ftevent-2-1", "ftevent-1", "ftjob-1"),
        f"/v1/fine_tuning/jobs/{first}/checkpoints": ("ftckpt-2-1", "ftckpt-1", "x"),
    }
    for path, wrong in lists.items():
        for after in wrong:
            response = client.get(path, params={"after": after}, headers=alice)
            error = response.json()["error"]
            assert response.status_code == 400 and error["param"] == "after", (path, after)
            assert error["message"].startswith(f"'{after}' is not an id of this list; give "), (
                error["message"]
            )
        assert client.get(path, params={"after": ""}, headers=alice).status_code == 200
    # A right one still pages: the job before ftjob-2 is ftjob-1.
    page = client.get("/v1/fine_tuning/jobs", params={"after": second}, headers=alice).json()
    assert [job["id"] for job in page["data"]] == [first]
    events = client.get(f"/v1/fine_tuning/jobs/{first}/events", headers=alice).json()["data"]
    older = client.get(
        f"/v1/fine_tuning/jobs/{first}/events", params={"after": events[0]["id"]}, headers=alice
    ).json()["data"]
    assert [e["id"] for e in older] == [e["id"] for e in events[1:]]
