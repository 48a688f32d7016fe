"""One user's model, deleted while it is the only adapter on its base's engine: the base and
every other user's requests on it go on, and the deleted model's routes are 404s."""

import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import Server, login_over_http, make_user_over_http, qa_pairs, wait_for_status

pytestmark = pytest.mark.slow


def chat(client: httpx.Client, model: str) -> httpx.Response:
    return client.post(
        "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
        timeout=30,  # the request timeout is 300 s: a hang shows as a timeout here
    )


def test_deleting_the_only_adapter_on_a_base_leaves_the_base_serving_everyone(
    make_server: Callable[..., Server],
) -> None:
    server = make_server()
    admin = login_over_http(server)
    alice = server.client(make_user_over_http(server, admin, "alice"))
    bob = server.client(make_user_over_http(server, admin, "bob"))
    job = alice.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:3], "hyperparameters": {"epochs": 2}}
    ).json()
    model = wait_for_status(alice, job["id"], {"succeeded"}, timeout=120)["fine_tuned_model"]

    assert chat(bob, "builtin:tiny").status_code == 200  # the base's engine is loaded
    assert chat(alice, model).status_code == 200  # her adapter: the only one on it
    assert alice.delete(f"/v1/models/{model}").status_code == 200

    started = time.monotonic()
    for client in (bob, alice, bob):
        answered = chat(client, "builtin:tiny")
        assert answered.status_code == 200, answered.text
        assert answered.json()["choices"][0]["finish_reason"] in ("stop", "length")
    print(f"base answered 3 times in {time.monotonic() - started:.2f} s after the delete")

    job_id = job["id"]
    gone = {
        "chat": chat(alice, model),
        "model": alice.get(f"/v1/models/{model}"),
        "adapter": alice.get(f"/jobs/{job_id}/adapter"),
        "query": alice.post(f"/jobs/{job_id}/query", json={"question": "hi"}),
        "exports": alice.get(f"/jobs/{job_id}/exports"),
        "export": alice.get(f"/jobs/{job_id}/export", params={"format": "merged"}),
        "evaluation": alice.get(f"/jobs/{job_id}/evaluation"),
        "delete again": alice.delete(f"/v1/models/{model}"),
    }
    assert {name: r.status_code for name, r in gone.items()} == dict.fromkeys(gone, 404)
    assert all(
        "deleted" in r.json()["detail"] or "not yours" in r.json()["detail"]
        for r in gone.values()
        if "detail" in r.json()
    )
    assert alice.get(f"/jobs/{job_id}").json()["status"] == "succeeded"  # the job stays
