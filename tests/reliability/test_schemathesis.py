"""Schemathesis against a live server: every check, every operation, bounded examples."""

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.conftest import ROOT, Server, login_over_http, qa_pairs, wait_for_status

pytestmark = pytest.mark.slow


def test_no_server_error_and_no_schema_violation(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    # One trained model first, so that the routes of a model (ask, download, export,
    # delete it, then all of them again) are reached with a real one.
    server = make_server()
    admin = login_over_http(server)
    client = server.client(admin)
    seeded = client.post(
        "/jobs", json={"qa_pairs": qa_pairs()[:4], "hyperparameters": {"epochs": 2}}
    ).json()["id"]
    assert wait_for_status(client, seeded, {"succeeded", "failed"})["status"] == "succeeded"
    # Then no worker: the jobs the fuzzer creates would train one after another for minutes.
    server.stop()
    server.env["QATUNE_EMBEDDED_WORKER"] = "false"
    server.start()
    token = login_over_http(server)["Authorization"].removeprefix("Bearer ")
    har = tmp_path / "requests.har"
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{server.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            "all",
            "--max-examples",
            "5",
            "--seed",
            "20261122",
            "--workers",
            "1",
            "--no-color",
            "--report",
            "har",
            "--report-har-path",
            str(har),
        ],
        cwd=ROOT,  # schemathesis.toml: the operations whose content no schema can describe
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = result.stdout + result.stderr
    (tmp_path / "schemathesis.txt").write_text(report)
    summary = report[report.rfind("SUMMARY") :]
    print(summary)
    assert result.returncode == 0, summary
    assert "Failures" not in summary and " passed" in summary
    assert "Unhandled error" not in server.output()

    # The trained model deleted (by the stateful phase, whose walk follows the schema's
    # links, or here where it went elsewhere), then asked for: a deleted model's adapter
    # route was once a 500, found by a fuzzer in 10 minutes.
    calls = [
        (
            entry["request"]["method"],
            unquote(urlsplit(entry["request"]["url"]).path),
            entry["response"]["status"],
        )
        for entry in json.loads(har.read_text())["log"]["entries"]
    ]
    model = f"/v1/models/ft:builtin:tiny:admin::ftjob-{seeded}"
    on_seed = [c for c in calls if c[1].startswith((f"/jobs/{seeded}", model))]
    gone = next(
        (i for i, c in enumerate(on_seed) if c[:2] == ("DELETE", model) and c[2] == 200), None
    )
    job_deleted = ("DELETE", f"/jobs/{seeded}", 204) in on_seed
    if gone is None and job_deleted:  # the walk deleted the whole job: nothing left to ask
        assert all(status < 500 for _, _, status in on_seed)
        return
    if gone is None:  # the stateful walk took other links this time: as it would have, here
        api = server.client(login_over_http(server))
        assert api.delete(model).status_code == 200
        on_seed += [
            ("DELETE", model, 200),
            ("GET", f"/jobs/{seeded}/adapter", api.get(f"/jobs/{seeded}/adapter").status_code),
            (
                "POST",
                f"/jobs/{seeded}/query",
                api.post(f"/jobs/{seeded}/query", json={"question": "q"}).status_code,
            ),
        ]
        gone = len(on_seed) - 3
    job_gone = next(
        (
            i
            for i, c in enumerate(on_seed)
            if c[:2] == ("DELETE", f"/jobs/{seeded}") and c[2] == 204
        ),
        len(on_seed),
    )
    asked_after = [c for c in on_seed[gone + 1 : job_gone] if c[0] in ("GET", "POST")]
    print(
        f"{len(calls)} requests, {len(on_seed)} on the trained model: deleted, then asked "
        f"{len(asked_after)} times for it while its job stayed: {sorted(set(asked_after))}"
    )
    assert (  # the routes that once answered a deleted model with a 500
        ("GET", f"/jobs/{seeded}/adapter", 404) in asked_after
        or ("POST", f"/jobs/{seeded}/query", 404) in asked_after
    )
    assert all(status < 500 for _, _, status in on_seed)
