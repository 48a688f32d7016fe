"""The OpenAPI document's QA record schema (app/schemas/qa.py) holds every record the parser
accepts, so that a client that follows the document is never refused by it, and a record
the schema refuses is refused by the parser too (what a fuzzer's negative cases rely on)."""

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from app.core.config import Settings
from app.core.errors import ValidationFailed
from app.main import create_app
from app.schemas.qa import QA_RECORD_SCHEMA
from app.services.datasets.qa_parsing import validate_pairs
from tests.conftest import ROOT, tool_records

SCHEMA = jsonschema.Draft202012Validator(QA_RECORD_SCHEMA)
USER = {"role": "user", "content": "Where is my order?"}
ANSWER = {"role": "assistant", "content": "It ships on Monday."}
OTHER = {"role": "assistant", "content": "No idea."}
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
PARTS = [{"type": "text", "text": "And the "}, {"type": "text", "text": "box?"}]

ACCEPTED: list[dict[str, Any]] = [
    {"question": "Q?", "answer": "A."},
    {"question": "Q?", "answer": "A.", "system": "Be brief."},
    {"question": "Q?", "answer": "A.", "system": None},
    {"instruction": "Translate", "output": "chat", "system": "You translate to French."},
    {"instruction": "Translate", "input": "cat", "output": "chat"},
    {"messages": [USER, ANSWER]},
    {
        "messages": [
            {"role": "developer", "content": "Be brief."},
            USER,
            {**ANSWER, "weight": 0, "name": "agent_7"},
            {"role": "user", "content": PARTS},
            {"role": "assistant", "content": "In the hall.", "weight": 1.0},
        ]
    },
    *tool_records()[:2],
    {
        "functions": [{"name": "f", "parameters": {"type": "object"}}],
        "messages": [
            USER,
            {"role": "assistant", "content": None, "function_call": CALL["function"]},
            {"role": "function", "name": "f", "content": "{}"},
            ANSWER,
        ],
    },
    {"messages": [USER], "reference": "Monday"},  # a reinforcement prompt and its grader's field
    {"input": {"messages": [USER]}, "preferred_output": [ANSWER], "non_preferred_output": [OTHER]},
    {"input": {"messages": [USER]}, "preferred_output": ANSWER, "non_preferred_output": OTHER},
    {"prompt": "Where is my order?", "completion": "It ships on Monday."},
    {"prompt": "Where is my order?", "chosen": "It ships on Monday.", "rejected": "No idea."},
    {"prompt": "Q?", "completion": "A.", "chosen": "B.", "rejected": "C."},  # a preference
    {"prompt": [USER], "completion": [ANSWER]},
    {
        "prompt": [{"role": "system", "content": "Be brief."}, USER, ANSWER, USER],
        "completion": [OTHER],
    },
    {"prompt": [USER], "chosen": [ANSWER], "rejected": [OTHER]},
    {"chosen": [USER, ANSWER], "rejected": [USER, OTHER]},
    {"chosen": [USER, ANSWER], "rejected": [USER, OTHER], "score_chosen": 8.0},
    {
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Where is my order?"},
            {"from": "gpt", "value": "It ships on Monday."},
        ],
        "id": "identity_0",
    },
]

REFUSED: list[dict[str, Any]] = [
    {"messages": []},
    {"messages": [{"role": "narrator", "content": "42"}, ANSWER]},
    {
        "messages": [
            USER,
            {
                "role": "assistant",
                "tool_calls": [CALL | {"function": {"name": "f", "arguments": {}}}],
            },
        ]
    },
    {"messages": [USER, ANSWER], "tools": [{"type": "function", "function": {"name": 3}}]},
    {"messages": [USER, {"role": "assistant", "tool_calls": [{"id": "c", "type": "web"}]}]},
    {"messages": [USER, {"role": "assistant"}]},
    {"messages": [USER, {**ANSWER, "weight": 2}]},
    {"messages": [USER, {**ANSWER, "weight": True}]},
    {"messages": [USER, {**ANSWER, "name": 7}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}, ANSWER]},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, ANSWER]},
    {"messages": [{"role": "user", "content": []}, ANSWER]},
    {"messages": [{"role": "user", "content": "   "}, ANSWER]},
    {"input": {"messages": [USER]}, "preferred_output": [ANSWER]},
    {"input": {"messages": [USER]}, "preferred_output": [USER], "non_preferred_output": [ANSWER]},
    {"question": "Q?"},
    {"question": "Q?", "answer": 3},
    {"question": "Q?", "answer": "A.", "system": " "},
    {"question": "Q?", "answer": "A.", "system": ["Be brief."]},
    {"prompt": "Q?"},
    {"completion": "A."},
    {"prompt": "Q?", "completion": "A.", "chosen": "B."},  # a preference without its rejected
    {"prompt": "Q?", "completion": [ANSWER]},  # text and messages mixed
    {"prompt": [USER], "completion": [USER]},  # a completion is the assistant's
    {"prompt": [USER], "chosen": [ANSWER, OTHER], "rejected": [OTHER]},  # one answer each
    {"chosen": "A.", "rejected": "B."},  # a text preference needs its prompt
    {"conversations": []},
    {"conversations": [{"from": "human", "value": "Q?"}, {"from": "bard", "value": "A."}]},
    {"conversations": [{"from": "human", "value": "Q?"}, {"from": "gpt", "value": " "}]},
    {"conversations": [{"from": "human", "value": "Q?"}, {"from": "gpt"}]},
    {"conversations": "Q? A.", "prompt": "Q?", "completion": "A."},  # ShareGPT's, read first
    {"chosen": [USER, ANSWER], "rejected": [{"role": "user", "content": 5}, OTHER]},
    {"prompt": "Q?", "completion": "A.", "question": "Q?"},  # a QA pair without its answer
]


def data_records() -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((ROOT / "tests/data").glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


@pytest.mark.parametrize("record", ACCEPTED, ids=lambda r: json.dumps(r)[:60])
def test_a_record_the_parser_accepts_fits_the_documented_schema(record: dict[str, Any]) -> None:
    assert validate_pairs([record])
    errors = [error.message for error in SCHEMA.iter_errors(record)]
    assert not errors, errors


def test_every_record_of_the_test_files_fits_it() -> None:
    records = data_records()
    assert len(validate_pairs(records)) >= len(records)
    unfit = [r for r in records if not SCHEMA.is_valid(r)]
    assert not unfit, unfit[:3]


@pytest.mark.parametrize("record", REFUSED, ids=lambda r: json.dumps(r)[:60])
def test_a_record_outside_the_schema_is_refused_by_the_parser(record: dict[str, Any]) -> None:
    assert not SCHEMA.is_valid(record)
    with pytest.raises(ValidationFailed):
        validate_pairs([record])


def test_the_post_jobs_body_documents_the_record_shapes(tmp_path: Path) -> None:
    document = create_app(Settings(data_dir=tmp_path, log_dir=tmp_path / "logs")).openapi()
    body = document["components"]["schemas"]["JobCreate"]["properties"]["qa_pairs"]
    assert body["items"] == QA_RECORD_SCHEMA
    titles = [branch["title"] for branch in QA_RECORD_SCHEMA["anyOf"]]
    assert any(title.startswith("Chat record") for title in titles)
    assert any(title.startswith("Preference record") for title in titles)
