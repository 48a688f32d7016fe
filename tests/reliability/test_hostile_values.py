"""Values no schema-driven fuzzer writes, in every field, query parameter and path
parameter of every operation, on both databases: never a 500.

Hypothesis (under Schemathesis) writes no lone surrogate and no NUL, and keeps to the
digits 0-9; each of these, and the usual suspects around them, was once a 500 somewhere
(docs/reliability.md says where)."""

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from tests.api.test_error_words import json_fields
from tests.conftest import ADMIN_PASSWORD, login

pytestmark = pytest.mark.slow

HOSTILE: list[Any] = [  # 30
    "",
    "x" * 300_000,
    "a\u0000b",
    "a\ud800b",  # sent as JSON's escape: a lone surrogate
    "²",
    "١٢",
    "😀" * 1_000,
    "\u202e",
    "../../../etc/passwd",
    "ft:builtin:tiny:x:y:ftjob-1",
    "file-1",
    "file-²",
    "ftjob-1",
    "eval_1",
    "{{7*7}}",
    "%s%n",
    -1,
    0,
    2**63,
    2**64,
    -(2**63) - 1,
    1e308,
    -0.0,
    1.5,
    True,
    None,
    [],
    {},
    [None],
    {"": None},
]


def test_no_hostile_value_is_a_server_error(app_env: Path) -> None:
    from app.core.config import Settings
    from app.main import create_app

    with TestClient(create_app(Settings()), raise_server_exceptions=False) as client:
        admin = login(client, "admin", ADMIN_PASSWORD)
        upload = {"file": ("faq.jsonl", b'{"question": "q", "answer": "a"}\n')}
        client.post("/v1/files", files=upload, data={"purpose": "fine-tune"}, headers=admin)
        document = client.get("/openapi.json").json()
        as_json = {**admin, "Content-Type": "application/json"}
        errors: list[tuple[str, ...]] = []
        sent = 0
        for method, url, field, body, _ in json_fields(document):
            name, _, nested = field.partition(".")
            for value in HOSTILE:
                hostile = {**body, name: {nested: value} if nested else value}
                content = json.dumps(hostile)  # ASCII: a surrogate goes as its escape
                answer = client.request(method.upper(), url, content=content, headers=as_json)
                sent += 1
                if answer.status_code >= 500:
                    errors.append((method, url, field, repr(value)[:30], answer.text[:120]))
        for path, operations in document["paths"].items():
            if path.endswith("/stream"):
                continue  # a live stream of a queued job waits for its end
            url = re.sub(r"\{[^}]+\}", "1", path)
            for method, operation in operations.items():
                for parameter in operation.get("parameters", []):
                    if parameter["in"] != "query":
                        continue
                    for value in HOSTILE:
                        if isinstance(value, str) and "\ud800" in value:
                            continue  # a URL carries UTF-8: no surrogate gets that far
                        query = {parameter["name"]: json.dumps(value)[:5_000]}
                        answer = client.request(method.upper(), url, params=query, headers=admin)
                        sent += 1
                        if answer.status_code >= 500:
                            errors.append((method, url, parameter["name"], repr(value)[:30]))
        for path, operations in document["paths"].items():
            if "{" not in path or path.endswith("/stream"):
                continue
            for value in HOSTILE:
                if not isinstance(value, str) or not value or "\ud800" in value:
                    continue
                url = re.sub(r"\{[^}]+\}", quote(value[:2_000], safe=""), path)
                for method in operations:
                    answer = client.request(method.upper(), url, json={}, headers=admin)
                    sent += 1
                    if answer.status_code >= 500:
                        errors.append((method, path, "path", repr(value)[:30]))
    print(f"\n{sent} hostile requests, {len(errors)} server errors")
    assert not errors, errors[:10]
    assert sent > 5_000
