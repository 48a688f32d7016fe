from fastapi.testclient import TestClient

from tests.conftest import ADMIN_PASSWORD, login


def test_health_needs_no_token(client: TestClient) -> None:
    assert client.get("/health").json()["status"] == "ok"


def test_every_other_endpoint_needs_a_token(client: TestClient) -> None:
    for method, path in [
        ("GET", "/auth/me"),
        ("GET", "/jobs"),
        ("POST", "/jobs"),
        ("GET", "/datasets"),
        ("GET", "/models"),
        ("GET", "/system/device"),
        ("GET", "/jobs/1/logs"),
        ("POST", "/users"),
        ("GET", "/users"),
    ]:
        response = client.request(method, path)
        assert response.status_code == 401, (method, path)
        assert response.headers["www-authenticate"] == "Bearer"
        assert "Bearer" in response.json()["detail"]


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
    body = {"username": "carol", "password": "carol-password"}
    assert client.post("/users", json=body, headers=alice).status_code == 403
    assert client.post("/users", json=body, headers=admin_headers).status_code == 201
    again = client.post("/users", json=body, headers=admin_headers)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]
    short = client.post("/users", json={"username": "d", "password": "x"}, headers=admin_headers)
    assert short.status_code == 422
    assert {e["field"] for e in short.json()["errors"]} == {"username", "password"}


def test_generated_admin_password_is_stored_private(tmp_path, model_cache, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

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
