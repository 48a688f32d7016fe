"""Picking a base model: what is on offer and cached here, and a typed name checked before
a job is made of it (GET /models/check; POST /jobs refuses what an offline service cannot
fetch). The hub's cache is a real one, in a temporary directory, holding a real model."""

import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.names import SMOLLM2
from app.ml.packaged import installed
from tests.conftest import qa_pairs

CACHED = "acme/tiny-chat"


@pytest.fixture
def hub_cache(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub cache as huggingface_hub lays it out, holding the built-in model as acme's."""
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    repo = cache / f"models--{CACHED.replace('/', '--')}"
    revision = "0123456789abcdef0123456789abcdef01234567"
    builtin = next(p for p in model_cache.iterdir() if (p / "config.json").is_file())
    shutil.copytree(builtin, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def check(client: TestClient, headers: dict[str, str], name: str) -> dict[str, object]:
    response = client.get("/models/check", params={"name": name}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_models_on_offer_include_those_cached_here(
    client: TestClient, alice: dict[str, str], hub_cache: Path
) -> None:
    offered = client.get("/models", headers=alice).json()["base_models"]
    packaged = [(SMOLLM2, "packaged")] if installed(SMOLLM2) else []  # `make setup` installs it
    assert [(m["name"], m["kind"]) for m in offered] == [
        ("builtin:tiny", "builtin"),
        *packaged,
        (CACHED, "cached"),
    ]


def test_a_typed_name_is_checked_before_a_job_is_made(
    client: TestClient,
    alice: dict[str, str],
    admin_headers: dict[str, str],
    hub_cache: Path,
    model_cache: Path,
) -> None:
    builtin = check(client, alice, "builtin:tiny")
    assert builtin["usable"] and builtin["cached"] and builtin["source"] == "builtin"
    assert "ready here" in str(builtin["message"])

    cached = check(client, alice, CACHED)
    assert (cached["usable"], cached["cached"], cached["source"]) == (True, True, "cached")

    # Not downloaded, and this service may not reach the hub: said now, with what to do.
    missing = check(client, alice, "someone/not-here")
    assert (missing["usable"], missing["cached"], missing["source"]) == (False, False, "hub")
    assert "QATUNE_OFFLINE is set" in str(missing["message"])
    assert "huggingface-cli download someone/not-here" in str(missing["message"])

    # A directory on the server: admins only, and its contents checked.
    directory = str(next(p for p in model_cache.iterdir() if (p / "config.json").is_file()))
    refused = client.get("/models/check", params={"name": directory}, headers=alice)
    assert refused.status_code == 403 and "Only admins" in refused.json()["detail"]
    local = check(client, admin_headers, directory)
    assert (local["usable"], local["source"]) == (True, "local")
    empty = check(client, admin_headers, "/nonexistent/model")
    assert not empty["usable"] and "has no config.json" in str(empty["message"])

    # Not a model name at all: the words of POST /jobs.
    wrong = client.get("/models/check", params={"name": "gpt-4o-mini"}, headers=alice)
    assert wrong.status_code == 422 and "hub id like" in wrong.json()["detail"]
    assert wrong.json()["detail"].startswith("name 'gpt-4o-mini' is not a model qatune knows")
    assert wrong.json()["errors"][0]["field"] == "name"  # the parameter asked, not a job's field


def test_an_offline_service_refuses_a_job_on_a_model_it_cannot_fetch(
    client: TestClient, alice: dict[str, str], hub_cache: Path
) -> None:
    def create(base_model: str) -> Any:
        body = {"qa_pairs": qa_pairs()[:4], "base_model": base_model}
        return client.post("/jobs", json=body, headers=alice)

    refused = create("Qwen/Qwen2.5-0.5B-Instruct")
    assert refused.status_code == 409, refused.text
    assert "is not cached and QATUNE_OFFLINE is set" in refused.json()["detail"]
    assert client.get("/jobs", headers=alice).json()["total"] == 0  # nothing half-made
    assert create(CACHED).status_code == 201
