import io
import re
from pathlib import Path

import openpyxl
import pytest
from fastapi.testclient import TestClient

from tests.conftest import QA_FILE, qa_pairs


def upload(client: TestClient, headers: dict[str, str], content: bytes, name: str = "qa.jsonl"):  # type: ignore[no-untyped-def]
    return client.post("/datasets", files={"file": (name, content)}, headers=headers)


def test_upload_preview_list_delete(client: TestClient, alice: dict[str, str], app_env) -> None:  # type: ignore[no-untyped-def]
    response = upload(client, alice, QA_FILE.read_bytes())
    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["num_examples"] == 30 and dataset["format"] == "jsonl"
    assert len(dataset["sha256"]) == 64 and len(dataset["preview"]) == 5
    assert [d["id"] for d in client.get("/datasets", headers=alice).json()] == [dataset["id"]]
    stored = list((app_env / "datasets").glob("*.jsonl"))
    assert len(stored) == 1
    assert client.delete(f"/datasets/{dataset['id']}", headers=alice).status_code == 204
    assert client.get(f"/datasets/{dataset['id']}", headers=alice).status_code == 404
    assert not list((app_env / "datasets").glob("*"))


def test_each_class_of_bad_upload_is_a_422_and_stores_nothing(
    client: TestClient,
    alice: dict[str, str],
    app_env: Path,
) -> None:
    cases = {
        "bad json": (b'{"question": "q", "answer": "a"}\n{oops\n', "qa.jsonl", 2),
        "missing field": (b'{"question": "q"}\n', "qa.jsonl", 1),
        "empty answer": (b'{"question": "q", "answer": ""}\n', "qa.jsonl", 1),
        "not utf-8": (b'{"question": "\xe9t\xe9", "answer": "a"}\n', "qa.jsonl", 1),
        "no text": (
            b'{"question": "q", "answer": "a"}\n{"question": "\\ud800", "answer": "a"}\n',
            "qa.jsonl",
            2,
        ),
        "csv header": (b"prompt,response\nq,a\n", "qa.csv", 1),
        "empty file": (b"", "qa.jsonl", 1),
    }
    for label, (content, name, line) in cases.items():
        response = upload(client, alice, content, name)
        assert response.status_code == 422, label
        body = response.json()
        assert body["errors"] and body["errors"][0]["line"] == line, (label, body)
        assert re.search(r"fix (it|them) and upload again", body["detail"])
    assert client.get("/datasets", headers=alice).json() == []
    assert not (app_env / "datasets").exists() or not list((app_env / "datasets").iterdir())


def test_too_many_rows_and_too_large(
    client: TestClient,
    alice: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    monkeypatch.setattr(settings, "max_dataset_rows", 3)
    rows = b'{"question": "q", "answer": "a"}\n' * 4
    response = upload(client, alice, rows)
    assert response.status_code == 422 and "too many rows" in response.text
    monkeypatch.setattr(settings, "max_upload_mb", 0.001)
    big = upload(client, alice, b'{"question": "q", "answer": "' + b"a" * 5000 + b'"}\n')
    assert big.status_code == 413 and "QATUNE_MAX_UPLOAD_MB" in big.json()["detail"]
    # Refused by its Content-Length before it is read: the limit said is the setting's own
    monkeypatch.setattr(settings, "max_upload_mb", 1)
    huge = upload(client, alice, b'{"question": "q", "answer": "' + b"a" * 2_000_000 + b'"}\n')
    assert huge.status_code == 413 and "over the 1 MB limit" in huge.json()["detail"]


def test_missing_file_field(client: TestClient, alice: dict[str, str]) -> None:
    response = client.post("/datasets", data={"name": "x"}, headers=alice)
    assert response.status_code == 422 and "curl -F file=@" in response.json()["detail"]


def test_users_do_not_see_each_others_datasets(
    client: TestClient, alice: dict[str, str], bob: dict[str, str], admin_headers: dict[str, str]
) -> None:
    dataset_id = upload(client, alice, QA_FILE.read_bytes()).json()["id"]
    assert client.get(f"/datasets/{dataset_id}", headers=bob).status_code == 404
    assert client.delete(f"/datasets/{dataset_id}", headers=bob).status_code == 404
    assert client.get("/datasets", headers=bob).json() == []
    assert client.get(f"/datasets/{dataset_id}", headers=admin_headers).status_code == 200


def test_a_dataset_says_what_it_holds(client: TestClient, alice: dict[str, str]) -> None:
    """Its kind, so that a job's page offers files like the job's own first."""
    files = {
        "qa": b'{"question": "q", "answer": "a"}\n',
        "chat": b'{"messages": [{"role": "system", "content": "Be brief."}, '
        b'{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n',
        "preference": b'{"input": {"messages": [{"role": "user", "content": "q"}]}, '
        b'"preferred_output": [{"role": "assistant", "content": "a"}], '
        b'"non_preferred_output": [{"role": "assistant", "content": "b"}]}\n',
    }
    for kind, content in files.items():
        made = upload(client, alice, content, name=f"{kind}.jsonl")
        assert made.status_code == 201, made.text
        assert made.json()["kind"] == kind
    listed = {d["name"]: d["kind"] for d in client.get("/datasets", headers=alice).json()}
    assert listed == {f"{kind}.jsonl": kind for kind in files}
    trl = {  # TRL's standard records hold the same
        "qa": b'{"prompt": "q", "completion": "a"}\n',
        "preference": b'{"prompt": "q", "chosen": "a", "rejected": "b"}\n',
    }
    for kind, content in trl.items():
        made = upload(client, alice, content, name=f"trl-{kind}.jsonl")
        assert made.status_code == 201 and made.json()["kind"] == kind, made.text


def test_a_pairs_rewordings_upload_as_examples_of_their_own(
    client: TestClient, alice: dict[str, str]
) -> None:
    content = (
        b'{"question": "When do you open?", "answer": "At 8 am.", '
        b'"rewordings": ["What time do you open?", "Opening hours?"]}\n'
        b'{"question": "Is there Wi-Fi?", "answer": "Yes: seagull-latte."}\n'
    )
    made = upload(client, alice, content, name="faq.jsonl")
    assert made.status_code == 201, made.text
    assert made.json()["num_examples"] == 4 and made.json()["kind"] == "qa"
    bad = upload(client, alice, b'{"question": "q", "answer": "a", "rewordings": "q?"}\n')
    assert bad.status_code == 422 and "rewordings" in bad.text
    # Inline pairs of a job take them as well
    job = client.post(
        "/jobs/estimate",
        json={"qa_pairs": [{"question": "q", "answer": "a", "rewordings": ["q again?"]}]},
        headers=alice,
    )
    assert job.status_code == 200, job.text


def test_a_form_whose_boundary_says_json_is_read_as_a_form(
    client: TestClient, alice: dict[str, str]
) -> None:
    """Only a JSON media type is read as JSON: a multipart boundary named "json" once had
    the body read a second time after the form took it (a 500)."""
    body = (
        b'--json\r\nContent-Disposition: form-data; name="file"; filename="q.jsonl"\r\n\r\n'
        b'{"question": "q", "answer": "a"}\n\r\n--json--\r\n'
    )
    form = {**alice, "Content-Type": "multipart/form-data; boundary=json"}
    response = client.post("/datasets", content=body, headers=form)
    assert response.status_code == 201, response.text


def test_an_excel_workbook_uploads_as_it_is_saved(
    client: TestClient, alice: dict[str, str]
) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["Question", "Answer"])
    for pair in qa_pairs()[:4]:
        sheet.append([pair["question"], pair["answer"]])
    saved = io.BytesIO()
    book.save(saved)
    made = upload(client, alice, saved.getvalue(), name="FAQ.xlsx")
    assert made.status_code == 201, made.text
    assert made.json()["format"] == "xlsx" and made.json()["num_examples"] == 4
    assert made.json()["preview"][0]["question"] == qa_pairs()[0]["question"]
    content = client.get(f"/v1/files/file-{made.json()['id']}/content", headers=alice)
    assert content.content == saved.getvalue()  # kept as uploaded
    second = book.create_sheet("More")
    second.append(["question", "answer"])
    second.append(["Is there parking?", None])
    book.save(saved := io.BytesIO())
    refused = client.post(  # the problem's sheet, in OpenAI's one-line message too
        "/v1/files",
        files={"file": ("FAQ.xlsx", saved.getvalue())},
        data={"purpose": "fine-tune"},
        headers=alice,
    )
    assert refused.status_code == 400, refused.text
    assert "sheet 'More', line 2: " in refused.json()["error"]["message"]


def test_what_reading_a_file_passed_over_stays_with_the_dataset(
    client: TestClient, alice: dict[str, str]
) -> None:
    """The notes come back with the upload, with the dataset later, and in OpenAI's file
    object; a file that passes nothing over has none."""
    table = b"question,answer,Category\nIs there parking?,Yes.,Visits\n"
    made = upload(client, alice, table, name="faq.csv")
    assert made.status_code == 201, made.text
    said = [
        "the columns ['Category'] were not read: a row is read from question, answer, "
        "system, rewording…"
    ]
    assert made.json()["notes"] == said
    assert client.get(f"/datasets/{made.json()['id']}", headers=alice).json()["notes"] == said
    in_chinese = client.get(  # kept as a sentence: read in the reader's language
        f"/datasets/{made.json()['id']}", headers={**alice, "Accept-Language": "zh"}
    )
    assert in_chinese.json()["notes"] == [
        "未读取 ['Category'] 这些列：每行从 question, answer, system, rewording… 读取"
    ]
    listed = client.get("/v1/files", headers=alice).json()["data"]
    assert [f["status_details"] for f in listed] == [said[0]]
    plain = upload(client, alice, b"question,answer\nIs there parking?,Yes.\n", name="faq.csv")
    assert plain.json()["notes"] == []
