"""Schemathesis against a live server: every check, every operation, bounded examples."""

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, ROOT, Server

pytestmark = pytest.mark.slow


def test_no_server_error_and_no_schema_violation(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    # No worker: the jobs it creates would train one after another for minutes.
    server = make_server(QATUNE_EMBEDDED_WORKER="false")
    token = httpx.post(
        f"{server.url}/auth/token", data={"username": "admin", "password": ADMIN_PASSWORD}
    ).json()["access_token"]
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
            "25",
            "--seed",
            "20261122",
            "--workers",
            "1",
            "--no-color",
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
