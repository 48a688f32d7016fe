"""Every route says what it answers, in the OpenAPI document: a schema for JSON, or the
media type it sends instead (downloads, streams, metrics), or no body (204)."""

from pathlib import Path

from app.core.config import Settings
from app.main import create_app


def test_every_operation_documents_its_answer(tmp_path: Path) -> None:
    document = create_app(Settings(data_dir=tmp_path, log_dir=tmp_path / "logs")).openapi()
    undocumented = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                content = response.get("content", {})
                json = content.get("application/json")
                if not content or (json is not None and not json.get("schema")):
                    undocumented.append(f"{method.upper()} {path} {status}")
    assert not undocumented, f"answers without a schema: {undocumented}"
