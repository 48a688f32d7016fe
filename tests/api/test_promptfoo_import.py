"""A Promptfoo suite imported as an eval: written as Promptfoo's configuration reference
describes promptfooconfig.yaml (prompts with {{vars}}, providers, defaultTest, tests with
vars and assert lists), not from qatune's own shapes. Each mapped assert grades only the
tests that have it; each unmapped one is named with its test."""

import gzip
import json
from typing import Any

from fastapi.testclient import TestClient

from tests.api.test_evals import finished

SUITE = """\
description: Cafe FAQ
prompts:
  - 'Answer the customer: {{question}}'
  - file://prompts/system_and_user.json
providers:
  - openai:gpt-4o-mini
defaultTest:
  assert:
    - type: llm-rubric
      value: Answers politely
tests:
  - description: opening hours
    vars:
      question: When do you open?
    assert:
      - type: equals
        value: We open at 8 am.
  - vars:
      question: Do you have wifi?
      expected: Yes, free wifi.
    assert:
      - type: contains
        value: wifi
      - type: similar
        value: '{{expected}}'
        threshold: 0.6
  - vars: {question: 'Where are you?'}
    assert:
      - type: icontains-all
        value: [main street, '12']
      - type: javascript
        value: output.length < 100
      - type: is-json
"""


def imported(
    client: TestClient,
    headers: dict[str, str],
    text: str,
    name: str = "promptfooconfig.yaml",
    **form: str,
) -> Any:
    return client.post(
        "/v1/evals/promptfoo", files={"file": (name, text.encode())}, data=form, headers=headers
    )


def test_a_promptfoo_suite_becomes_an_eval_whose_asserts_grade_their_own_tests(
    client: TestClient, alice: dict[str, str]
) -> None:
    # A prompt in a file cannot be read from here: the import says so, and makes nothing.
    refused = imported(client, alice, SUITE)
    assert refused.status_code == 400, refused.text
    assert "file://prompts/system_and_user.json" in refused.json()["error"]["message"]
    assert client.get("/v1/evals", headers=alice).json()["data"] == []

    made = imported(client, alice, SUITE.replace("  - file://prompts/system_and_user.json\n", ""))
    assert made.status_code == 200, made.text
    body = made.json()
    evaluation = body["eval"]
    criteria = {c["name"]: c for c in evaluation["testing_criteria"]}
    assert list(criteria) == ["equals", "contains", "similar_0_6", "icontains", "icontains_2"]
    assert criteria["equals"]["operation"] == "eq"
    assert criteria["icontains"]["operation"] == "ilike"
    assert criteria["similar_0_6"]["evaluation_metric"] == "rouge_l"
    assert criteria["similar_0_6"]["pass_threshold"] == 0.6
    assert evaluation["metadata"] == {"imported_from": "promptfoo"}
    assert evaluation["name"] == "Cafe FAQ"
    # Each unmapped assert, with its test: the rubric for want of a judge, on every test.
    assert [(u["test"], u["type"]) for u in body["unmapped"]] == [
        (1, "llm-rubric"),
        (2, "llm-rubric"),
        (3, "llm-rubric"),
        (3, "javascript"),
        (3, "is-json"),
    ]
    assert "judge" in body["unmapped"][0]["why"]

    # The items are a file of OpenAI's eval lines, each test's values in its own fields.
    file_id = body["file"]["id"]
    assert body["file"]["purpose"] == "evals"
    lines = client.get(f"/v1/files/{file_id}/content", headers=alice).text.splitlines()
    items = [json.loads(line)["item"] for line in lines]
    assert items[1] == {
        "vars": {"question": "Do you have wifi?", "expected": "Yes, free wifi."},
        "contains": "wifi",
        "similar_0_6": "Yes, free wifi.",  # {{expected}} filled in, as Promptfoo renders it
    }
    assert items[2]["icontains"] == "main street" and items[2]["icontains_2"] == "12"
    (draft,) = body["data_sources"]
    assert draft["source"] == {"type": "file_id", "id": file_id}
    assert draft["input_messages"]["template"] == [
        {"role": "user", "content": "Answer the customer: {{ item.vars.question }}", "type": None}
    ]

    # Graded on given answers: a criterion grades only the tests that have its assert.
    answers = ["We open at 8 am.", "Free wifi here", "We are at 12 Main Street"]
    rows = [
        {"item": item, "sample": {"output_text": a}} for item, a in zip(items, answers, strict=True)
    ]
    source = {"type": "jsonl", "source": {"type": "file_content", "content": rows}}
    started = client.post(
        f"/v1/evals/{evaluation['id']}/runs", json={"data_source": source}, headers=alice
    )
    assert started.status_code == 200, started.text
    run = finished(client, alice, evaluation["id"], started.json()["id"])
    assert run["result_counts"] == {"total": 3, "passed": 3, "failed": 0, "errored": 0}
    counted = {c["testing_criteria"]: c for c in run["per_testing_criteria_results"]}
    assert {name: c["passed"] + c["failed"] for name, c in counted.items()} == {
        "equals": 1,
        "contains": 1,
        "similar_0_6": 1,
        "icontains": 1,
        "icontains_2": 1,
    }
    output = client.get(
        f"/v1/evals/{evaluation['id']}/runs/{run['id']}/output_items?order=asc", headers=alice
    ).json()["data"]
    assert [[r["name"] for r in o["results"]] for o in output] == [
        ["equals"],
        ["contains", "similar_0_6"],
        ["icontains", "icontains_2"],
    ]

    # A model answers the suite's prompt: the run's data source is the draft with a model.
    sampled = client.post(
        f"/v1/evals/{evaluation['id']}/runs",
        json={
            "data_source": {
                **draft,
                "model": "builtin:tiny",
                "sampling_params": {"max_completion_tokens": 4},
            }
        },
        headers=alice,
    )
    assert sampled.status_code == 200, sampled.text
    run = finished(client, alice, evaluation["id"], sampled.json()["id"])
    assert run["status"] == "completed" and run["result_counts"]["total"] == 3
    asked = client.get(
        f"/v1/evals/{evaluation['id']}/runs/{run['id']}/output_items?order=asc", headers=alice
    ).json()["data"][0]["sample"]["input"]
    assert asked == [{"role": "user", "content": "Answer the customer: When do you open?"}]


def test_a_judge_grades_the_rubric(client: TestClient, alice: dict[str, str]) -> None:
    made = imported(
        client,
        alice,
        SUITE.replace("  - file://prompts/system_and_user.json\n", ""),
        judge="builtin:tiny",
    )
    assert made.status_code == 200, made.text
    criteria = {c["name"]: c for c in made.json()["eval"]["testing_criteria"]}
    rubric = criteria["llm_rubric_0_5"]
    assert rubric["type"] == "score_model" and rubric["model"] == "builtin:tiny"
    assert "{{ item.llm_rubric_0_5 }}" in rubric["input"][1]["content"]
    assert [u["type"] for u in made.json()["unmapped"]] == ["javascript", "is-json"]

    unknown = imported(
        client,
        alice,
        SUITE.replace("  - file://prompts/system_and_user.json\n", ""),
        judge="gpt-4o",
    )
    assert unknown.status_code in (400, 404), unknown.text
    assert "gpt-4o" in unknown.json()["error"]["message"]


def test_a_list_of_tests_with_one_var_each_is_a_suite_too(
    client: TestClient, alice: dict[str, str]
) -> None:
    tests = [
        {
            "vars": {"question": "Is there parking?"},
            "assert": [{"type": "icontains", "value": "yes"}],
        },
        {"vars": {"question": "Pets?"}, "assert": [{"type": "not-equals", "value": "No."}]},
    ]
    made = imported(client, alice, json.dumps(tests), name="tests.json")
    assert made.status_code == 200, made.text
    (draft,) = made.json()["data_sources"]
    assert draft["input_messages"]["template"][0]["content"] == "{{ item.vars.question }}"
    assert [c["operation"] for c in made.json()["eval"]["testing_criteria"]] == ["ilike", "ne"]


def test_what_cannot_be_imported_says_what_to_fix(
    client: TestClient, alice: dict[str, str]
) -> None:
    cases = {
        "tests: file://tests.csv\nprompts: ['{{q}}']\n": "put the tests themselves in the file",
        "prompts: ['{{q}}']\ntests: []\n": "the file has no tests",
        "tests:\n  - vars: {q: a}\n    assert: [{type: javascript, value: 'true'}]\n": "javascript",
        "x: &big [1, 2]\ntests: *big\n": "YAML aliases",
        "tests: [\n  - vars\n": "neither JSON nor YAML",
        "tests:\n  - vars: {a: 1, b: 2}\n    assert: [{type: equals, value: x}]\n": "no prompts",
        "- just text\n": "test 1 is not an object",
    }
    for text, words in cases.items():
        refused = imported(client, alice, text)
        assert refused.status_code == 400, (text, refused.text)
        error = refused.json()["error"]
        assert words in error["message"] and error["param"] == "file", (text, error)
    assert client.get("/v1/evals", headers=alice).json()["data"] == []
    assert client.get("/v1/files?purpose=evals", headers=alice).json()["data"] == []


def test_a_suite_saved_as_utf16_is_read(client: TestClient, alice: dict[str, str]) -> None:
    suite = SUITE.replace("  - file://prompts/system_and_user.json\n", "")
    made = client.post(
        "/v1/evals/promptfoo",
        files={"file": ("promptfooconfig.yaml", suite.encode("utf-16"))},
        headers=alice,
    )
    assert made.status_code == 200, made.text
    as_utf8 = imported(client, alice, suite).json()
    assert made.json()["eval"]["testing_criteria"] == as_utf8["eval"]["testing_criteria"]
    packed = client.post(  # read as eval files and datasets are: said what it is
        "/v1/evals/promptfoo",
        files={"file": ("promptfooconfig.yaml.gz", gzip.compress(suite.encode(), mtime=0))},
        headers=alice,
    )
    assert packed.status_code == 400, packed.text
    assert "this is a compressed file (gzip" in packed.json()["error"]["message"]


def test_hostile_files_are_a_400_not_a_crash(client: TestClient, alice: dict[str, str]) -> None:
    cases = {
        "[" * 50_000 + "]" * 50_000: "nested too deeply",
        "- " * 20_000 + "x\n": "nested too deeply",
        "tests:\n  - vars: {q: .nan}\n    assert: [{type: equals, value: x}]\n": "not finite",
        '{"tests": [{"vars": {"q": 1e999}, "assert": [{"type": "equals"}]}]}': "not finite",
        "just a sentence": "a config (an object) or a list of tests",
        '{"tests": [{"vars": {"q": "\\udc80"}}]}': "tests.0.vars.q: a lone surrogate",
    }
    for text, words in cases.items():
        refused = imported(client, alice, text)
        assert refused.status_code == 400, (text[:40], refused.text)
        assert words in refused.json()["error"]["message"], (text[:40], refused.text)
    long_judge = imported(
        client,
        alice,
        SUITE.replace("  - file://prompts/system_and_user.json\n", ""),
        judge="j" * 600,
    )
    assert long_judge.status_code == 400 and long_judge.json()["error"]["param"] == "judge"
