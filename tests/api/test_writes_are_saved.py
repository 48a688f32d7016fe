"""A 2xx means saved, and a write that cannot be saved says so and leaves nothing.

FastAPI runs a yield dependency's exit code after the response by default; the session's
commit must not wait for that, or a client that reads right after a 201 (or a commit that
then fails) sees the change missing.
"""

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, event
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.conftest import ADMIN_PASSWORD, QA_FILE, login, qa_pairs


class Timeline:
    """What happened, in order: requests, commits, and the start of each response."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def between(self, request: str) -> list[str]:
        start = self.entries.index(f"request {request}")
        end = self.entries.index(f"response {request}", start)
        return self.entries[start + 1 : end]


class RecordResponses:
    def __init__(self, app: ASGIApp, timeline: Timeline) -> None:
        self.app, self.timeline = app, timeline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        name = f"{scope['method']} {scope['path']}"
        self.timeline.entries.append(f"request {name}")

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.timeline.entries.append(f"response {name}")
            await send(message)

        await self.app(scope, receive, recording_send)


@pytest.fixture
def recorded(app_env: Path) -> Iterator[tuple[TestClient, Timeline]]:
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    timeline = Timeline()

    def committed(_session: Session) -> None:
        timeline.entries.append("commit")

    app = create_app(Settings())
    app.add_middleware(RecordResponses, timeline=timeline)
    event.listen(Session, "after_commit", committed)
    try:
        with TestClient(app) as client:
            yield client, timeline
    finally:
        event.remove(Session, "after_commit", committed)


def test_writes_commit_before_their_response_starts(
    recorded: tuple[TestClient, Timeline],
) -> None:
    client, timeline = recorded
    admin = login(client, "admin", ADMIN_PASSWORD)
    dataset = client.post(
        "/datasets", files={"file": ("qa.jsonl", QA_FILE.read_bytes())}, headers=admin
    )
    job = client.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}, headers=admin)
    assert dataset.status_code == job.status_code == 201
    cancelled = client.post(f"/jobs/{job.json()['id']}/cancel", headers=admin)
    deleted = client.delete(f"/datasets/{dataset.json()['id']}", headers=admin)
    assert cancelled.status_code == 200 and deleted.status_code == 204

    for request in (
        "POST /datasets",
        "POST /jobs",
        f"POST /jobs/{job.json()['id']}/cancel",
        f"DELETE /datasets/{dataset.json()['id']}",
    ):
        assert "commit" in timeline.between(request), (request, timeline.entries)


@pytest.mark.usefixtures("sqlite_only")
def test_a_write_blocked_by_another_writer_is_a_503_and_leaves_nothing(
    app_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    monkeypatch.setenv("QATUNE_DATABASE_BUSY_SECONDS", "0.3")
    with TestClient(create_app(Settings())) as client:
        admin = login(client, "admin", ADMIN_PASSWORD)
        other_writer = sqlite3.connect(app_env / "qatune.db", isolation_level=None)
        other_writer.execute("BEGIN IMMEDIATE")  # holds the write lock, as a long write would
        try:
            dataset = client.post(
                "/datasets", files={"file": ("qa.jsonl", QA_FILE.read_bytes())}, headers=admin
            )
            job = client.post("/jobs", json={"qa_pairs": qa_pairs()[:4]}, headers=admin)
        finally:
            other_writer.execute("ROLLBACK")
            other_writer.close()
        for response in (dataset, job):
            assert response.status_code == 503, response.text
            assert "busy" in response.json()["detail"] and response.headers["Retry-After"]
        assert client.get("/datasets", headers=admin).json() == []
        assert client.get("/jobs", headers=admin).json()["total"] == 0
        assert not any((app_env / "datasets").glob("*")) and not any((app_env / "jobs").glob("*"))
        retried = client.post(
            "/datasets", files={"file": ("qa.jsonl", QA_FILE.read_bytes())}, headers=admin
        )
        assert retried.status_code == 201, retried.text


def test_a_request_that_finds_no_free_connection_is_a_503(
    app_env: Path, database_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection of PostgreSQL's pool in use (10, and 20 more) for the busy timeout:
    a 503 to retry, not a 500; once one is free, the same request is served."""
    if database_url is None:
        pytest.skip("SQLite's pool has no limit: a request never waits for a connection")
    from app.core.config import Settings
    from app.main import create_app

    monkeypatch.setenv("QATUNE_DATABASE_BUSY_SECONDS", "0.3")
    with TestClient(create_app(Settings())) as client:
        admin = login(client, "admin", ADMIN_PASSWORD)
        engine = client.app.state.runtime.database.engine  # type: ignore[attr-defined]
        held: list[Connection] = []
        try:
            while len(held) < 30:  # what the pool holds at most
                held.append(engine.connect())
            crowded = client.get("/jobs", headers=admin)
        finally:
            for connection in held:
                connection.close()
        assert crowded.status_code == 503, crowded.text
        assert "no free connection" in crowded.json()["detail"]
        assert crowded.headers["Retry-After"] == "2"
        assert client.get("/jobs", headers=admin).status_code == 200


def test_text_with_a_nul_is_refused_alike_on_every_database(
    client: TestClient, alice: dict[str, str]
) -> None:
    """PostgreSQL's text cannot hold U+0000 (a 500 there); SQLite kept it. Both refuse it
    now, with what to do, and keep nothing of the request."""
    nul = "faq\u0000v2"
    refused = [
        client.post("/jobs", json={"qa_pairs": qa_pairs()[:2], "name": nul}, headers=alice),
        client.post("/api-keys", json={"name": nul}, headers=alice),
        client.get("/v1/models/faq%00v2", headers=alice),
    ]
    named = (  # a file name with a NUL, as no client library writes one (httpx sends %00)
        b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nfine-tune\r\n'
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="faq\x00.jsonl"\r\n\r\n'
        b'{"question": "q", "answer": "a"}\n\r\n--b--\r\n'
    )
    multipart = {**alice, "Content-Type": "multipart/form-data; boundary=b"}
    refused.append(client.post("/v1/files", content=named, headers=multipart))
    # A label is read back as text by the metadata filter, which PostgreSQL cannot do.
    labelled = {"qa_pairs": qa_pairs()[:2], "metadata": {"team": nul}}
    refused.append(client.post("/jobs", json=labelled, headers=alice))
    for response in refused:
        assert response.status_code in (400, 422), response.text
        error = response.json()
        said = error["detail"] if "detail" in error else error["error"]["message"]
        assert "Text with a NUL character (\\u0000) is not accepted; remove it" in said, said
        assert said.endswith("send again"), said  # nothing after it: no empty list of lines
    assert client.get("/jobs", headers=alice).json()["total"] == 0
    assert client.get("/api-keys", headers=alice).json() == []
    assert client.get("/v1/files", headers=alice).json()["data"] == []


def test_a_nul_in_any_row_of_a_many_row_insert_refuses_them_all(app_env: Path) -> None:
    """Rows flushed together reach the database as one statement's flat values (or as
    executemany's rows): the check sees every string either way."""
    from app.core.config import Settings
    from app.core.errors import ValidationFailed
    from app.db.models import User
    from app.db.session import Database

    database = Database.from_settings(Settings())
    try:
        rows = [User(username=f"u{n}", password_hash="x") for n in range(3)]
        rows[2].password_hash = "x\u0000"
        with pytest.raises(ValidationFailed), database.session() as session:
            session.add_all(rows)
        with database.session() as session:
            assert session.query(User).filter(User.username.like("u%")).count() == 0
    finally:
        database.dispose()
