"""API keys: made once, stored as a hash, acting as their user, refused once revoked."""

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db.models import ApiKey
from tests.conftest import qa_pairs


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_a_key_acts_as_its_user_until_revoked(
    client: TestClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    made = client.post("/api-keys", json={"name": "laptop script"}, headers=alice)
    assert made.status_code == 201
    key = made.json()
    assert key["key"].startswith("qk-") and key["prefix"] == key["key"][:10]
    listed = client.get("/api-keys", headers=alice).json()
    assert [k["name"] for k in listed] == ["laptop script"] and "key" not in listed[0]
    assert listed[0]["last_used_at"] is None

    as_alice = bearer(key["key"])
    assert client.get("/auth/me", headers=as_alice).json()["username"] == "alice"
    job = client.post("/jobs", json={"qa_pairs": qa_pairs()[:3]}, headers=as_alice).json()
    assert client.get(f"/jobs/{job['id']}", headers=alice).status_code == 200  # her job
    assert client.get(f"/jobs/{job['id']}", headers=bob).status_code == 404  # not bob's
    assert client.get("/api-keys", headers=alice).json()[0]["last_used_at"] is not None

    assert client.delete(f"/api-keys/{key['id']}", headers=bob).status_code == 404
    assert client.delete(f"/api-keys/{key['id']}", headers=alice).status_code == 204
    refused = client.get("/auth/me", headers=as_alice)
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    posted = client.post("/jobs", json={"qa_pairs": qa_pairs()[:3]}, headers=as_alice)
    assert posted.status_code == 401  # refused before the body is read, too
    assert client.get("/api-keys", headers=alice).json() == []


def test_only_a_hash_of_the_key_is_stored(client: TestClient, alice: dict[str, str]) -> None:
    secret = client.post("/api-keys", json={"name": "ci"}, headers=alice).json()["key"]
    database = client.app.state.runtime.database  # type: ignore[attr-defined]
    with database.session() as session:
        stored = session.scalar(select(ApiKey))
        assert stored is not None and secret not in (stored.secret_hash, stored.prefix)
    made_up = bearer("qk-" + "x" * 43)
    assert client.get("/auth/me", headers=made_up).status_code == 401
