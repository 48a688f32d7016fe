"""What admins do to other users: disable (at once, tokens and keys alike), reset a
password, delete with everything they own; and what they may not do."""

import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.models import ApiKey, Job
from app.jobs.status import JobStatus
from tests.conftest import login, qa_pairs


def user_id(client: TestClient, admin: dict[str, str], name: str) -> int:
    users = client.get("/users", headers=admin).json()
    return next(u["id"] for u in users if u["username"] == name)


def test_a_disabled_user_is_locked_out_at_once_and_comes_back_when_enabled(
    client: TestClient, admin_headers: dict[str, str], alice: dict[str, str]
) -> None:
    key = client.post("/api-keys", json={"name": "script"}, headers=alice).json()["key"]
    with_key = {"Authorization": f"Bearer {key}"}
    assert client.get("/jobs", headers=with_key).status_code == 200
    alice_id = user_id(client, admin_headers, "alice")
    changed = client.patch(f"/users/{alice_id}", json={"disabled": True}, headers=admin_headers)
    assert changed.status_code == 200 and changed.json()["disabled"] is True
    for headers in (alice, with_key):  # the token she had, and her key: both refused now
        refused = client.get("/jobs", headers=headers)
        assert refused.status_code == 401 and "disabled" in refused.json()["detail"]
    sign_in = client.post(
        "/auth/token", data={"username": "alice", "password": "alice-kettle-marble-57"}
    )
    assert sign_in.status_code == 401 and "disabled" in sign_in.json()["detail"]
    client.patch(f"/users/{alice_id}", json={"disabled": False}, headers=admin_headers)
    assert client.get("/jobs", headers=with_key).status_code == 200
    assert client.get("/jobs", headers=alice).status_code == 200


def test_an_admin_resets_a_password_and_the_old_tokens_stop(
    client: TestClient, admin_headers: dict[str, str], alice: dict[str, str]
) -> None:
    alice_id = user_id(client, admin_headers, "alice")
    weak = client.post(
        f"/users/{alice_id}/password", json={"new_password": "password1"}, headers=admin_headers
    )
    assert weak.status_code == 422
    time.sleep(1.1)  # token times are whole seconds
    reset = client.post(
        f"/users/{alice_id}/password",
        json={"new_password": "violet-harbor-93-quill"},
        headers=admin_headers,
    )
    assert reset.status_code == 204
    assert client.get("/jobs", headers=alice).status_code == 401
    login(client, "alice", "violet-harbor-93-quill")
    # Their own password, admins change as anyone does, with the current one
    admin_id = user_id(client, admin_headers, "admin")
    own = client.post(
        f"/users/{admin_id}/password",
        json={"new_password": "violet-harbor-93-quill"},
        headers=admin_headers,
    )
    assert own.status_code == 409 and "POST /auth/password" in own.json()["detail"]
    assert client.get("/jobs", headers=admin_headers).status_code == 200


def test_a_deleted_user_goes_with_what_they_owned(
    client: TestClient, admin_headers: dict[str, str], alice: dict[str, str], app_env: Path
) -> None:
    lines = "\n".join(f'{{"question": "q{i}", "answer": "a{i}"}}' for i in range(4))
    upload = client.post("/datasets", files={"file": ("qa.jsonl", lines)}, headers=alice)
    assert upload.status_code == 201
    job_id = client.post("/jobs", json={"qa_pairs": qa_pairs()[:3]}, headers=alice).json()["id"]
    client.post("/api-keys", json={"name": "script"}, headers=alice)
    alice_id = user_id(client, admin_headers, "alice")

    def files(folder: str) -> list[Path]:
        return [p for p in (app_env / folder).rglob("*") if p.is_file()]

    assert files("datasets") and files("jobs")
    database = client.app.state.runtime.database  # type: ignore[attr-defined]
    with database.session() as session:  # as if the worker had claimed it
        session.get_one(Job, job_id).status = JobStatus.RUNNING
    running = client.delete(f"/users/{alice_id}", headers=admin_headers)
    assert running.status_code == 409 and f"Job {job_id} of alice is running" in running.text
    with database.session() as session:
        session.get_one(Job, job_id).status = JobStatus.CANCELLED

    assert client.delete(f"/users/{alice_id}", headers=admin_headers).status_code == 204
    assert client.get(f"/jobs/{job_id}", headers=admin_headers).status_code == 404
    names = [u["username"] for u in client.get("/users", headers=admin_headers).json()]
    assert "alice" not in names
    assert client.get("/jobs", headers=alice).status_code == 401
    assert files("datasets") == [] and files("jobs") == []  # hers were the only ones
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(ApiKey)) == 0
    assert client.delete(f"/users/{alice_id}", headers=admin_headers).status_code == 404


def test_what_an_admin_may_not_do(
    client: TestClient, admin_headers: dict[str, str], alice: dict[str, str]
) -> None:
    admin_id = user_id(client, admin_headers, "admin")
    alice_id = user_id(client, admin_headers, "alice")
    for request in (
        client.patch(f"/users/{admin_id}", json={"disabled": True}, headers=admin_headers),
        client.patch(f"/users/{admin_id}", json={"is_admin": False}, headers=admin_headers),
        client.delete(f"/users/{admin_id}", headers=admin_headers),
    ):
        assert request.status_code == 409 and "another admin" in request.json()["detail"]
    for request in (  # and a user who is not an admin may do none of it
        client.patch(f"/users/{alice_id}", json={"disabled": True}, headers=alice),
        client.post(f"/users/{admin_id}/password", json={"new_password": "x" * 12}, headers=alice),
        client.delete(f"/users/{admin_id}", headers=alice),
    ):
        assert request.status_code == 403
    unknown = client.patch(f"/users/{alice_id}", json={"disabeld": True}, headers=admin_headers)
    assert unknown.status_code == 422
