"""/v1/fine_tuning/alpha/graders: OpenAI's grader JSON, validated and run as OpenAI does."""

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import ADMIN_PASSWORD, EXACT_ANSWER, login, make_user

SIMILAR = {
    "type": "text_similarity",
    "name": "similar",
    "input": "{{ sample.output_text }}",
    "reference": "{{ item.answer }}",
    "evaluation_metric": "rouge_l",
}
ITEM = {"question": "Where do I reset my password?", "answer": "On the login page"}


def run(
    client: TestClient, headers: dict[str, str], grader: Any, sample: str, item: Any = ITEM
) -> Any:
    body = {"grader": grader, "model_sample": sample, "item": item}
    return client.post("/v1/fine_tuning/alpha/graders/run", json=body, headers=headers)


def validate(client: TestClient, headers: dict[str, str], grader: Any) -> Any:
    return client.post(
        "/v1/fine_tuning/alpha/graders/validate", json={"grader": grader}, headers=headers
    )


def test_graders_score_a_sample(client: TestClient, alice: dict[str, str]) -> None:
    right = run(client, alice, EXACT_ANSWER, "On the login page")
    assert right.status_code == 200, right.text
    body = right.json()
    assert body["reward"] == 1.0 and body["metadata"]["name"] == "exact"
    assert not any(v for k, v in body["metadata"]["errors"].items() if v is True)
    assert run(client, alice, EXACT_ANSWER, "In the settings").json()["reward"] == 0.0
    # ROUGE-L: 4 of the answer's 6 words in order, all 4 of the reference's: F1 0.8
    similar = run(client, alice, SIMILAR, "on the login page, top right").json()
    assert similar["reward"] == pytest.approx(0.8)

    multi = {
        "type": "multi",
        "name": "blend",
        "graders": {"exact": EXACT_ANSWER, "similar": SIMILAR},
        "calculate_output": "0.5 * exact + 0.5 * similar",
    }
    blended = run(client, alice, multi, "On the login page").json()
    assert blended["reward"] == 1.0 and blended["sub_rewards"] == {"exact": 1.0, "similar": 1.0}

    # JSON answers can be read field by field.
    fields = dict(EXACT_ANSWER, input="{{ sample.output_json.where }}")
    assert run(client, alice, fields, '{"where": "On the login page"}').json()["reward"] == 1.0
    unparsed = run(client, alice, fields, "not json").json()
    assert unparsed["reward"] == 0.0 and unparsed["metadata"]["errors"]["sample_parse_error"]


def test_a_variable_the_item_lacks_scores_zero_with_a_flag(
    client: TestClient, alice: dict[str, str]
) -> None:
    graded = run(client, alice, EXACT_ANSWER, "On the login page", item={"question": "q"}).json()
    assert graded["reward"] == 0.0 and graded["metadata"]["errors"]["invalid_variable_error"]
    assert "item has no 'answer'" in graded["metadata"]["explanation"]


@pytest.mark.parametrize(
    "change,param,words",
    [
        ({"operation": "contains"}, "grader.operation", "operation"),
        ({"colour": "red"}, "grader.colour", "colour"),
        ({"reference": "{{ reference }}"}, "grader.reference", "must start with 'item.'"),
        ({"type": "label_model"}, "grader.type", "type"),
        ({"name": ""}, "grader.name", "name"),
    ],
)
def test_a_grader_openai_would_refuse_is_a_400_naming_the_field(
    client: TestClient, alice: dict[str, str], change: dict[str, Any], param: str, words: str
) -> None:
    refused = validate(client, alice, {**EXACT_ANSWER, **change})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == param and words in error["message"], error
    assert refused.headers["x-should-retry"] == "false"


def test_what_this_service_cannot_do_is_a_400_too(
    client: TestClient, alice: dict[str, str], admin_headers: dict[str, str]
) -> None:
    multi = {
        "type": "multi",
        "name": "m",
        "graders": {"exact": EXACT_ANSWER},
        "calculate_output": "exact + other",
    }
    refused = validate(client, alice, multi).json()["error"]
    assert refused["param"] == "grader.calculate_output" and "'other'" in refused["message"]

    cosine = validate(client, alice, dict(SIMILAR, evaluation_metric="cosine")).json()["error"]
    assert cosine["param"] == "grader.evaluation_metric" and "embedding model" in cosine["message"]

    python = {"type": "python", "name": "p", "source": "def grade(sample, item):\n    return 1\n"}
    off = validate(client, alice, python)
    assert off.status_code == 400 and "QATUNE_PYTHON_GRADERS=true" in off.json()["error"]["message"]
    nested = {"type": "multi", "name": "m", "graders": {"code": python}, "calculate_output": "code"}
    assert validate(client, alice, nested).json()["error"]["param"] == "grader.graders.code.type"

    judge = {
        "type": "score_model",
        "name": "judge",
        "model": "ft:builtin:tiny:qatune:someone-else:ftjob-999",
        "input": [{"role": "user", "content": "Score {{ sample.output_text }}"}],
    }
    missing = validate(client, alice, judge).json()["error"]
    assert missing["param"] == "grader.model" and "GET /v1/models" in missing["message"]
    reasoning = dict(judge, model="builtin:tiny", sampling_params={"reasoning_effort": "high"})
    assert validate(client, alice, reasoning).json()["error"]["param"] == (
        "grader.sampling_params.reasoning_effort"
    )


def test_a_base_model_judges_and_its_tokens_are_counted(
    client: TestClient, alice: dict[str, str]
) -> None:
    judge = {
        "type": "score_model",
        "name": "judge",
        "model": "builtin:tiny",
        "input": [
            {"role": "system", "content": "Answer with a number from 0 to 1."},
            {"role": "user", "content": "Q: {{ item.question }} A: {{ sample.output_text }}"},
        ],
        "sampling_params": {"max_completions_tokens": 8, "seed": 1},
    }
    validated = validate(client, alice, judge).json()["grader"]
    assert {k: validated[k] for k in ("type", "name", "model")} == {
        "type": "score_model",
        "name": "judge",
        "model": "builtin:tiny",
    }
    graded = run(client, alice, judge, "On the login page").json()
    usage = graded["model_grader_token_usage_per_model"]
    assert graded["metadata"]["token_usage"] == usage["builtin:tiny"] > 8
    # The untrained model says no number (a parse error, reward 0) or a number in range.
    errors = graded["metadata"]["errors"]
    assert errors["model_grader_parse_error"] or 0 <= graded["reward"] <= 1


def test_the_grader_endpoints_need_a_login(client: TestClient) -> None:
    assert run(client, {}, EXACT_ANSWER, "x").status_code == 401


@pytest.fixture
def python_client(app_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from app.core.config import Settings
    from app.main import create_app

    monkeypatch.setenv("QATUNE_PYTHON_GRADERS", "true")
    monkeypatch.setenv("QATUNE_PYTHON_GRADER_WALL_SECONDS", "4")
    with TestClient(create_app(Settings())) as test_client:
        yield test_client


def test_python_graders_run_when_an_admin_turns_them_on(python_client: TestClient) -> None:
    admin = login(python_client, "admin", ADMIN_PASSWORD)
    alice = make_user(python_client, admin, "alice")
    source = (
        "def grade(sample, item):\n"
        "    return 1.0 if item['answer'].lower() in sample['output_text'].lower() else 0.0\n"
    )
    python = {"type": "python", "name": "contains", "source": source}
    assert (
        run(python_client, alice, python, "It is on the LOGIN PAGE, top right").json()["reward"]
        == 1.0
    )

    # A grader that never ends is stopped and scored as an error; the service answers meanwhile.
    spin = {
        "type": "python",
        "name": "spin",
        "source": "import time\ndef grade(s, i):\n    time.sleep(60)\n",
    }
    graded: list[Any] = []
    thread = threading.Thread(
        target=lambda: graded.append(run(python_client, alice, spin, "x").json())
    )
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert python_client.get("/health").status_code == 200
    assert time.monotonic() - started < 1
    thread.join()
    errors = graded[0]["metadata"]["errors"]
    assert graded[0]["reward"] == 0.0 and errors["python_grader_runtime_error"]
    assert "still running after 4 s" in errors["python_grader_runtime_error_details"]
