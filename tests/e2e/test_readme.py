"""The README's examples run as written."""

import re
import subprocess
import sys

import httpx
import pytest

from tests.conftest import ROOT, Server, login_over_http

pytestmark = pytest.mark.slow


def test_the_openai_example_runs_against_a_live_server(server: Server) -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- openai-example -->\n```python\n(.*?)```", readme, re.S)
    assert match, "the README lost its OpenAI example"
    key = httpx.post(
        f"{server.url}/api-keys", json={"name": "readme"}, headers=login_over_http(server)
    ).json()["key"]
    result = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        cwd=ROOT,
        env={**server.env, "QATUNE_URL": server.url, "QATUNE_API_KEY": key},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("succeeded ft:builtin:tiny:admin:faq:ftjob-")
    assert "builtin:tiny" in lines[-1]
