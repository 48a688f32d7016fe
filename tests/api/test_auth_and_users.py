import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core.proof_of_work import solve
from tests.conftest import ADMIN_PASSWORD, login


def test_health_needs_no_token(client: TestClient) -> None:
    assert client.get("/health").json()["status"] == "ok"


def test_every_other_endpoint_needs_a_token(client: TestClient) -> None:
    """Every operation the API documents, bar the two it leaves open: health, signing in."""
    open_operations = {("get", "/health"), ("post", "/auth/token")}
    checked = 0
    for path, operations in client.get("/openapi.json").json()["paths"].items():
        for method in operations:
            url = re.sub(r"\{[^}]+\}", "1", path)
            response = client.request(method.upper(), url)
            if (method, path) in open_operations:
                assert response.status_code != 401, (method, path)
                continue
            assert response.status_code == 401, (method, path, response.status_code)
            assert response.headers["www-authenticate"] == "Bearer"
            error = response.json()
            assert "Bearer" in (error["error"]["message"] if "error" in error else error["detail"])
            checked += 1
    assert checked >= 70  # every operation but the open two


def test_login_and_me(client: TestClient) -> None:
    headers = login(client, "admin", ADMIN_PASSWORD)
    me = client.get("/auth/me", headers=headers).json()
    assert me["username"] == "admin" and me["is_admin"]
    token = client.post("/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD})
    assert token.json()["token_type"] == "bearer" and token.json()["expires_in"] > 0


def test_wrong_password_and_bad_tokens(client: TestClient) -> None:
    wrong = client.post("/auth/token", data={"username": "admin", "password": "nope"})
    assert wrong.status_code == 401 and "Wrong username or password" in wrong.json()["detail"]
    ghost = client.post("/auth/token", data={"username": "ghost", "password": "nope"})
    assert ghost.status_code == 401
    bad = client.get("/auth/me", headers={"Authorization": "Bearer not.a.token"})
    assert bad.status_code == 401 and "sign in again" in bad.json()["detail"]


def test_only_admins_create_users(
    client: TestClient, admin_headers: dict[str, str], alice: dict[str, str]
) -> None:
    body = {"username": "carol", "password": "carol-kettle-marble-57"}
    assert client.post("/users", json=body, headers=alice).status_code == 403
    assert client.post("/users", json=body, headers=admin_headers).status_code == 201
    again = client.post("/users", json=body, headers=admin_headers)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]
    short = client.post("/users", json={"username": "d", "password": "x"}, headers=admin_headers)
    assert short.status_code == 422
    assert {e["field"] for e in short.json()["errors"]} == {"username", "password"}


def test_generated_admin_password_is_stored_private(tmp_path: Path, model_cache: Path) -> None:
    from app.core.config import Settings
    from app.main import create_app
    from tests.conftest import prepare_data_dir

    data_dir = tmp_path / "fresh"
    prepare_data_dir(data_dir, model_cache)
    settings = Settings(data_dir=data_dir, log_dir=tmp_path / "logs", embedded_worker=False)
    with TestClient(create_app(settings)) as fresh:
        password_file = data_dir / "admin_password"
        assert password_file.stat().st_mode & 0o777 == 0o600
        assert (data_dir / "secret_key").stat().st_mode & 0o777 == 0o600
        login(fresh, "admin", password_file.read_text().strip())


@pytest.mark.usefixtures("sqlite_only")
def test_data_dir_and_database_are_private(client: TestClient, app_env: Path) -> None:
    assert app_env.stat().st_mode & 0o777 == 0o700
    assert (app_env / "qatune.db").stat().st_mode & 0o777 == 0o600


def test_weak_passwords_are_refused_with_the_reason(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    for password, why in [("password", "common"), ("dave2026", "weak"), ("davedave", "weak")]:
        body = {"username": "dave", "password": password}
        response = client.post("/users", json=body, headers=admin_headers)
        assert response.status_code == 422, password
        assert why in response.json()["detail"].lower()


def test_changing_the_password_signs_out_everywhere(
    client: TestClient, admin_headers: dict[str, str], alice: dict[str, str]
) -> None:
    change = {"current_password": "wrong", "new_password": "tulip-harbor-93-violin"}
    assert client.post("/auth/password", json=change, headers=alice).status_code == 401
    weak = {"current_password": "alice-kettle-marble-57", "new_password": "alice123"}
    assert client.post("/auth/password", json=weak, headers=alice).status_code == 422
    change["current_password"] = "alice-kettle-marble-57"
    time.sleep(1.1)  # token times are whole seconds
    assert client.post("/auth/password", json=change, headers=alice).status_code == 204
    old = client.get("/auth/me", headers=alice)
    assert old.status_code == 401 and "password was changed" in old.json()["detail"]
    new = login(client, "alice", "tulip-harbor-93-violin")
    assert client.get("/auth/me", headers=new).json()["username"] == "alice"


def test_the_generated_admin_password_file_goes_once_the_admin_chooses_one(
    tmp_path: Path, model_cache: Path
) -> None:
    from app.core.config import Settings
    from app.main import create_app
    from tests.conftest import prepare_data_dir

    data_dir = tmp_path / "fresh"
    prepare_data_dir(data_dir, model_cache)
    settings = Settings(data_dir=data_dir, log_dir=tmp_path / "logs", embedded_worker=False)
    with TestClient(create_app(settings)) as fresh:
        saved = data_dir / "admin_password"
        generated = saved.read_text().strip()
        headers = login(fresh, "admin", generated)
        change = {"current_password": generated, "new_password": "granite-owl-48-lantern"}
        assert fresh.post("/auth/password", json=change, headers=headers).status_code == 204
        assert not saved.exists()


def test_repeated_wrong_passwords_are_throttled_but_never_lock_the_owner_out(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr("app.core.throttle.time.monotonic", lambda: clock[0])
    wrong = {"username": "admin", "password": "not-the-password"}
    statuses = [client.post("/auth/token", data=wrong).status_code for _ in range(8)]
    assert statuses[:6] == [401] * 6 and statuses[6:] == [429, 429]
    refused = client.post("/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert "Too many failed sign-ins" in refused.json()["detail"]
    clock[0] += 2.0  # the delay has passed: the right password works again
    login(client, "admin", ADMIN_PASSWORD)
    clock[0] += 4000.0  # long after: even a flood's delays are gone
    for _ in range(200):
        client.post("/auth/token", data=wrong)
    clock[0] += 901.0  # the longest delay, 15 minutes, is the most anyone waits
    login(client, "admin", ADMIN_PASSWORD)
    statuses = []
    while 429 not in statuses:  # one failure per 15 minutes: no waits, until the account's
        statuses.append(client.post("/auth/token", data=wrong).status_code)  # free ones end
        clock[0] += 901.0
    assert len(statuses) < 12 and set(statuses[:-1]) == {401}, statuses
    asked = client.post("/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD})
    assert asked.status_code == 429 and asked.headers["Retry-After"] == "0"  # work, no wait
    challenge, bits = asked.headers["X-Qatune-Challenge"], int(asked.headers["X-Qatune-Work-Bits"])
    assert "proof of work" in asked.json()["detail"]
    proof = solve(challenge, bits)
    proven = {
        "username": "admin",
        "password": ADMIN_PASSWORD,
        "challenge": challenge,
        "proof": proof,
    }
    signed_in = client.post("/auth/token", data=proven)
    assert signed_in.status_code == 200, signed_in.text
    again = client.post("/auth/token", data=proven)  # a proof is good for one sign-in
    assert again.status_code == 429 and again.headers["X-Qatune-Challenge"] != challenge


def test_bodies_are_refused_before_they_are_read(
    client: TestClient, alice: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    unsigned = client.post(
        "/jobs", content=b"x" * 1000, headers={"content-type": "application/json"}
    )
    assert unsigned.status_code == 401 and unsigned.headers["connection"] == "close"
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    monkeypatch.setattr(settings, "max_upload_mb", 0.01)
    too_long = client.post(
        "/jobs", content=b"x" * 200_000, headers={**alice, "content-type": "application/json"}
    )
    assert too_long.status_code == 413 and "QATUNE_MAX_UPLOAD_MB" in too_long.json()["detail"]
    lying = client.post("/jobs", content=b"x", headers={**alice, "content-length": "99999999999"})
    assert lying.status_code == 413
