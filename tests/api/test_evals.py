"""/v1/evals: evals, runs over inline items and uploaded files, graded output items."""

import gzip
import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.test_openai_routes import upload
from tests.conftest import EXACT_ANSWER

CLOSE = {
    "type": "text_similarity",
    "name": "close",
    "input": "{{ sample.output_text }}",
    "reference": "{{ item.answer }}",
    "evaluation_metric": "rouge_l",
    "pass_threshold": 0.5,
}
SCHEMA = {
    "type": "object",
    "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
    "required": ["question", "answer"],
}


def make_eval(client: TestClient, headers: dict[str, str], **change: Any) -> Any:
    body = {
        "name": "faq",
        "data_source_config": {
            "type": "custom",
            "item_schema": SCHEMA,
            "include_sample_schema": True,
        },
        "testing_criteria": [EXACT_ANSWER, CLOSE],
        "metadata": {"team": "docs"},
    } | change
    return client.post("/v1/evals", json=body, headers=headers)


def finished(client: TestClient, headers: dict[str, str], eval_id: str, run_id: str) -> Any:
    deadline = time.monotonic() + 120
    while True:
        run = client.get(f"/v1/evals/{eval_id}/runs/{run_id}", headers=headers).json()
        if run["status"] not in ("queued", "in_progress"):
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.2)


GIVEN = [
    {
        "item": {"question": "q1", "answer": "On the login page"},
        "sample": {"output_text": "On the login page"},
    },
    {
        "item": {"question": "q2", "answer": "Three days"},
        "sample": {"output_text": "About three days"},
    },
    {"item": {"question": "q3", "answer": "Yes"}, "sample": {"output_text": "No"}},
    {"item": {"question": "q4", "answer": "Yes"}},  # no answer to grade: an error
]


def test_a_run_grades_given_answers_item_by_item(
    client: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    made = make_eval(client, alice)
    assert made.status_code == 200, made.text
    evaluation = made.json()
    eval_id = evaluation["id"]
    assert evaluation["object"] == "eval" and evaluation["metadata"] == {"team": "docs"}
    assert evaluation["data_source_config"]["schema"]["properties"]["item"] == SCHEMA

    source = {"type": "jsonl", "source": {"type": "file_content", "content": GIVEN}}
    started = client.post(f"/v1/evals/{eval_id}/runs", json={"data_source": source}, headers=alice)
    assert started.status_code == 200, started.text
    run = finished(client, alice, eval_id, started.json()["id"])
    assert run["status"] == "completed"
    assert run["result_counts"] == {"total": 4, "passed": 1, "failed": 2, "errored": 1}
    assert run["per_testing_criteria_results"] == [
        {"testing_criteria": "exact", "passed": 1, "failed": 2},
        {"testing_criteria": "close", "passed": 2, "failed": 1},
    ]
    assert run["report_url"].endswith(f"/ui/#/evals/{eval_id}/runs/{run['id']}")

    items = client.get(f"/v1/evals/{eval_id}/runs/{run['id']}/output_items", headers=alice).json()[
        "data"
    ]
    assert [i["status"] for i in items] == ["pass", "fail", "fail", "error"]
    second = items[1]
    assert second["datasource_item"] == GIVEN[1]["item"]
    assert [(r["name"], r["score"], r["passed"]) for r in second["results"]] == [
        ("exact", 0.0, False),
        ("close", pytest.approx(0.8), True),
    ]
    assert "sample.output_text" in items[3]["sample"]["error"]["message"]
    read_in_chinese = client.get(  # written by the run, read in each reader's language
        f"/v1/evals/{eval_id}/runs/{run['id']}/output_items/{items[3]['id']}",
        headers={**alice, "Accept-Language": "zh-CN"},
    ).json()
    assert read_in_chinese["sample"]["error"]["message"] == "这一行没有可评分的 sample.output_text"
    failed = client.get(
        f"/v1/evals/{eval_id}/runs/{run['id']}/output_items?status=fail", headers=alice
    ).json()["data"]
    assert [i["datasource_item_id"] for i in failed] == [1, 2]
    one = client.get(
        f"/v1/evals/{eval_id}/runs/{run['id']}/output_items/{second['id']}", headers=alice
    )
    assert one.json()["id"] == second["id"]

    # Bob sees none of it.
    for path in (f"/v1/evals/{eval_id}", f"/v1/evals/{eval_id}/runs/{run['id']}"):
        assert client.get(path, headers=bob).status_code == 404
    assert client.get("/v1/evals", headers=bob).json()["data"] == []
    assert (
        client.post(
            f"/v1/evals/{eval_id}/runs", json={"data_source": source}, headers=bob
        ).status_code
        == 404
    )

    # Rename, list, delete (with its runs).
    renamed = client.post(f"/v1/evals/{eval_id}", json={"name": "faq v2"}, headers=alice).json()
    assert renamed["name"] == "faq v2" and renamed["metadata"] == {"team": "docs"}
    assert [e["id"] for e in client.get("/v1/evals", headers=alice).json()["data"]] == [eval_id]
    deleted = client.delete(f"/v1/evals/{eval_id}", headers=alice).json()
    assert deleted == {"object": "eval.deleted", "deleted": True, "eval_id": eval_id}
    assert client.get(f"/v1/evals/{eval_id}/runs/{run['id']}", headers=alice).status_code == 404


def test_a_model_answers_the_items_of_a_file_and_is_graded(
    client: TestClient, alice: dict[str, str]
) -> None:
    eval_id = make_eval(client, alice).json()["id"]
    pairs = [{"question": f"Question {n}?", "answer": f"Answer {n}."} for n in range(5)]
    file_id = upload(
        client, alice, "faq.jsonl", "".join(json.dumps(p) + "\n" for p in pairs).encode()
    )
    source = {
        "type": "completions",
        "model": "builtin:tiny",
        "input_messages": {
            "type": "template",
            "template": [
                {"role": "developer", "content": "Answer briefly."},
                {"role": "user", "content": "{{ item.question }}"},
            ],
        },
        "sampling_params": {"temperature": 0, "max_completion_tokens": 6, "seed": 3},
        "source": {"type": "file_id", "id": file_id},
    }
    started = client.post(
        f"/v1/evals/{eval_id}/runs", json={"data_source": source, "name": "base"}, headers=alice
    )
    assert started.status_code == 200, started.text
    run = finished(client, alice, eval_id, started.json()["id"])
    assert run["status"] == "completed" and run["model"] == "builtin:tiny"
    counts = run["result_counts"]
    assert (
        counts["total"] == 5 and counts["errored"] == 0 and counts["passed"] + counts["failed"] == 5
    )
    (usage,) = run["per_model_usage"]
    assert usage["model_name"] == "builtin:tiny" and usage["invocation_count"] == 5
    assert 0 < usage["completion_tokens"] <= 5 * 6 < usage["total_tokens"]
    items = client.get(f"/v1/evals/{eval_id}/runs/{run['id']}/output_items", headers=alice).json()[
        "data"
    ]
    first = items[0]["sample"]
    assert first["input"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Question 0?"},
    ]
    assert first["model"] == "builtin:tiny" and first["temperature"] == 0.0 and first["seed"] == 3
    assert first["usage"]["completion_tokens"] <= 6 and first["finish_reason"] in ("stop", "length")

    # The messages can come from the item itself.
    chat = [
        {
            "item": {
                "question": "q",
                "answer": "a",
                "messages": [{"role": "user", "content": "Hello"}],
            }
        }
    ]
    source = {
        "type": "completions",
        "model": "builtin:tiny",
        "input_messages": {"type": "item_reference", "item_reference": "item.messages"},
        "sampling_params": {"temperature": 0, "max_completion_tokens": 4},
        "source": {"type": "file_content", "content": chat},
    }
    run = finished(
        client,
        alice,
        eval_id,
        client.post(
            f"/v1/evals/{eval_id}/runs", json={"data_source": source}, headers=alice
        ).json()["id"],
    )
    item = client.get(f"/v1/evals/{eval_id}/runs/{run['id']}/output_items", headers=alice).json()[
        "data"
    ][0]
    assert item["sample"]["input"] == [{"role": "user", "content": "Hello"}]


@pytest.mark.parametrize(
    "change,param,words",
    [
        (
            {"testing_criteria": [dict(EXACT_ANSWER, reference="{{ item.reference }}")]},
            "testing_criteria.0",
            "'reference'",
        ),
        (
            {"testing_criteria": [EXACT_ANSWER, dict(CLOSE, name="exact")]},
            "testing_criteria.1.name",
            "Two testing criteria",
        ),
        ({"testing_criteria": []}, "testing_criteria", "testing_criteria"),
        ({"data_source_config": {"type": "logs"}}, "data_source_config.type", '"custom"'),
        (
            {"testing_criteria": [dict(CLOSE, evaluation_metric="cosine")]},
            "testing_criteria.0.evaluation_metric",
            "embedding",
        ),
    ],
)
def test_an_eval_openai_would_refuse_is_a_400_naming_the_field(
    client: TestClient, alice: dict[str, str], change: dict[str, Any], param: str, words: str
) -> None:
    refused = make_eval(client, alice, **change)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == param and words in error["message"], error


def test_a_run_openai_would_refuse_is_a_400_too(client: TestClient, alice: dict[str, str]) -> None:
    eval_id = make_eval(client, alice).json()["id"]
    template = {
        "type": "template",
        "template": [{"role": "user", "content": "{{ item.question }}"}],
    }
    base = {
        "type": "completions",
        "model": "builtin:tiny",
        "input_messages": template,
        "source": {"type": "file_content", "content": [{"item": {"question": "q", "answer": "a"}}]},
    }
    cases = [
        (dict(base, model="ft:builtin:tiny:someone:x:ftjob-999"), "data_source.model"),
        (dict(base, source={"type": "file_id", "id": "file-999"}), "data_source.source.id"),
        (
            dict(
                base,
                input_messages={
                    "type": "template",
                    "template": [{"role": "user", "content": "{{ item.nope }}"}],
                },
            ),
            "data_source.input_messages",
        ),
        (dict(base, type="responses"), "data_source.type"),
    ]
    for source, param in cases:
        refused = client.post(
            f"/v1/evals/{eval_id}/runs", json={"data_source": source}, headers=alice
        )
        assert refused.status_code == 400, (param, refused.text)
        assert refused.json()["error"]["param"] == param, refused.json()


def test_a_job_without_a_model_cannot_be_graded_yet(
    client: TestClient, alice: dict[str, str]
) -> None:
    job = client.post(
        "/jobs", json={"qa_pairs": [{"question": "q", "answer": "a"}] * 2}, headers=alice
    ).json()
    file_id = upload(client, alice, "held.jsonl", b'{"question": "q", "answer": "a"}\n')
    dataset_id = int(file_id.removeprefix("file-"))
    early = client.post(f"/jobs/{job['id']}/evals", json={"dataset_id": dataset_id}, headers=alice)
    assert early.status_code == 409, early.text
    unknown = client.post(
        f"/jobs/{job['id']}/evals",
        json={"dataset_id": dataset_id, "criteria": ["vibes"]},
        headers=alice,
    )
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "criteria.0"


def test_an_eval_file_as_openai_exports_it_is_uploaded_and_run(
    client: TestClient, alice: dict[str, str]
) -> None:
    """`purpose="evals"` and OpenAI's eval data lines (`{"item": …}`, with `sample` where a
    run had one): once refused ("purpose must be 'fine-tune'", "unknown record fields")."""
    lines = "".join(json.dumps(row) + "\n" for row in GIVEN).encode()
    made = client.post(
        "/v1/files",
        files={"file": ("faq_eval.jsonl", lines)},
        data={"purpose": "evals"},
        headers=alice,
    )
    assert made.status_code == 200, made.text
    file = made.json()
    assert file["purpose"] == "evals" and file["bytes"] == len(lines)
    listed = client.get("/v1/files", params={"purpose": "evals"}, headers=alice).json()["data"]
    assert [f["id"] for f in listed] == [file["id"]]
    native = client.get(f"/datasets/{file['id'].removeprefix('file-')}", headers=alice).json()
    assert native["purpose"] == "evals" and native["num_examples"] == 4
    assert native["preview"] == []  # no training records to show
    utf16 = client.post(  # as Windows Notepad saves "Unicode"
        "/v1/files",
        files={"file": ("faq_eval.jsonl", lines.decode().encode("utf-16"))},
        data={"purpose": "evals"},
        headers=alice,
    )
    assert utf16.status_code == 200 and utf16.json()["bytes"] == 2 + 2 * len(lines), utf16.text
    client.delete(f"/v1/files/{utf16.json()['id']}", headers=alice)
    no_text = lines + b'{"item": {"question": "\\ud800"}}\n'  # a lone surrogate: no text
    refused = client.post(
        "/v1/files", files={"file": ("x.jsonl", no_text)}, data={"purpose": "evals"}, headers=alice
    )
    assert refused.status_code == 400, refused.text
    assert "line 5: item.question: a lone surrogate" in refused.json()["error"]["message"]
    deep = b'{"item": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"  # was a RecursionError: 500
    refused = client.post(
        "/v1/files", files={"file": ("x.jsonl", deep)}, data={"purpose": "evals"}, headers=alice
    )
    assert refused.status_code == 400 and "nested too deeply" in refused.text, refused.text
    packed = gzip.compress(lines)  # was "not UTF-8 text"
    refused = client.post(
        "/v1/files",
        files={"file": ("x.jsonl.gz", packed)},
        data={"purpose": "evals"},
        headers=alice,
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"].startswith(
        "The file cannot be read: this is a compressed file (gzip"
    )
    latin1 = client.post(  # where the bytes stop being UTF-8, and how to save it
        "/v1/files",
        files={"file": ("x.jsonl", '{"item": {"q": "café"}}'.encode("latin-1"))},
        data={"purpose": "evals"},
        headers=alice,
    )
    assert latin1.status_code == 400, latin1.text
    assert "not UTF-8 (byte 0xe9 at offset 19); save the file as UTF-8" in latin1.text

    eval_id = make_eval(client, alice).json()["id"]
    source = {"type": "jsonl", "source": {"type": "file_id", "id": file["id"]}}
    started = client.post(f"/v1/evals/{eval_id}/runs", json={"data_source": source}, headers=alice)
    assert started.status_code == 200, started.text
    run = finished(client, alice, eval_id, started.json()["id"])
    assert run["result_counts"] == {"total": 4, "passed": 1, "failed": 2, "errored": 1}

    # Not training data: a job from it is refused, saying so
    job = client.post(
        "/v1/fine_tuning/jobs",
        json={"model": "builtin:tiny", "training_file": file["id"]},
        headers=alice,
    )
    assert job.status_code == 400 and "not uploaded for fine-tune" in job.json()["error"]["message"]
    native_job = client.post(
        "/jobs", json={"dataset_id": int(file["id"].removeprefix("file-"))}, headers=alice
    )
    assert native_job.status_code == 422 and "holds an eval's items" in native_job.text

    # A bad file names each bad line, and nothing is kept
    bad = b'{"item": {"q": 1}}\n[1, 2]\n{"item": "text"}\n{"item": {}, "extra": 1}\nnot json\n'
    refused = client.post(
        "/v1/files", files={"file": ("bad.jsonl", bad)}, data={"purpose": "evals"}, headers=alice
    )
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    for line in ("line 2:", "line 3: item is not a JSON object", "line 4: has extra", "line 5:"):
        assert line in message, message
    assert "line 1:" not in message
    assert len(client.get("/v1/files", headers=alice).json()["data"]) == 1


def test_a_deleted_eval_or_run_still_marks_where_the_next_page_starts(
    client: TestClient, alice: dict[str, str]
) -> None:
    """A script that deletes what it lists, page by page, asks for the page after an id it
    has just deleted: the page that follows, not a 404."""
    evals = [make_eval(client, alice, name=f"e{n}").json()["id"] for n in range(3)]
    first = client.get("/v1/evals", params={"limit": 1}, headers=alice).json()
    assert [e["id"] for e in first["data"]] == evals[:1] and first["has_more"]
    assert client.delete(f"/v1/evals/{evals[0]}", headers=alice).status_code == 200
    rest = client.get("/v1/evals", params={"after": evals[0]}, headers=alice)
    assert rest.status_code == 200, rest.text
    assert [e["id"] for e in rest.json()["data"]] == evals[1:]

    source = {"type": "jsonl", "source": {"type": "file_content", "content": GIVEN}}
    runs = []
    for _ in range(2):
        started = client.post(
            f"/v1/evals/{evals[1]}/runs", json={"data_source": source}, headers=alice
        )
        runs.append(finished(client, alice, evals[1], started.json()["id"])["id"])
    assert client.delete(f"/v1/evals/{evals[1]}/runs/{runs[0]}", headers=alice).status_code == 200
    rest = client.get(f"/v1/evals/{evals[1]}/runs", params={"after": runs[0]}, headers=alice)
    assert rest.status_code == 200, rest.text
    assert [r["id"] for r in rest.json()["data"]] == runs[1:]
    # A name of another kind is still a 400: a client would read the first page as the next.
    wrong = client.get("/v1/evals", params={"after": runs[1]}, headers=alice)
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "after", wrong.text
