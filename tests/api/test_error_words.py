"""Every field of every request, sent wrong: the answer names the field as the user wrote
it and says what is accepted, in words; no library message, regular expression or type
name reaches the user (native and OpenAI shapes alike)."""

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import validation_words
from app.api.validation_words import PATTERN_WORDS


@pytest.fixture(autouse=True)
def one_database(database_url: str | None) -> None:
    if database_url is not None:
        pytest.skip("the words are the same on every database")


# What pydantic, FastAPI and regular expressions would have said.
LIBRARY_WORDS = re.compile(
    r"Input should|Extra inputs|String should|should match|valid integer|valid number|"
    r"constrained-|literal\[|Field required|type=|\[A-Za-z|\^|\$|pydantic|Value error"
)
WRONG = {"surely": ["not this"]}  # an object with a list in it: no field takes it
# The fields an operation requires, valid, so that a wrong field is judged on its own
# (some are checked only once the required ones are there).
VALID: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/v1/chat/completions"): {
        "model": "builtin:tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
    },
    ("post", "/v1/completions"): {"model": "builtin:tiny", "prompt": "hi", "max_tokens": 1},
    ("post", "/v1/fine_tuning/jobs"): {"model": "builtin:tiny", "training_file": "file-1"},
    ("post", "/users"): {"username": "someone", "password": "kettle-marble-tulip-57"},
}


def schemas(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def message_of(response: Any) -> str:
    body = response.json()
    return body["error"]["message"] if "error" in body else body["detail"]


def takes_an_object(document: dict[str, Any], schema: dict[str, Any]) -> bool:
    """An object of open keys, or anything at all (checked later, by the route)."""
    branches = [resolve(document, b) for b in [schema, *schema.get("anyOf", [])]]
    untyped = not ({"type", "anyOf", "oneOf", "$ref", "const", "enum"} & set(schema))
    return untyped or any(b.get("type") == "object" or "properties" in b for b in branches)


def json_fields(
    document: dict[str, Any],
) -> Iterator[tuple[str, str, str, dict[str, Any], bool]]:
    """(method, path, field as the user writes it, a body with that field wrong, whether
    the field can take WRONG at all: an object of open keys may)."""
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" not in content:
                continue
            body = resolve(document, content["application/json"]["schema"])
            url = re.sub(r"\{[^}]+\}", "1", path)
            valid = VALID.get((method, path), {})
            for name, field in body.get("properties", {}).items():
                wrong = not takes_an_object(document, field)
                yield method, url, name, {**valid, name: WRONG}, wrong
                inner = next(
                    (
                        resolve(document, branch)
                        for branch in [field, *field.get("anyOf", [])]
                        if "properties" in resolve(document, branch)
                    ),
                    None,
                )
                for nested, schema in (inner or {}).get("properties", {}).items():
                    wrong = not takes_an_object(document, schema)
                    yield method, url, f"{name}.{nested}", {**valid, name: {nested: WRONG}}, wrong


def test_every_field_sent_wrong_is_named_and_explained(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    document = client.get("/openapi.json").json()
    checked = 0
    for method, url, field, body, must_be_named in json_fields(document):
        response = client.request(method.upper(), url, json=body, headers=admin_headers)
        if response.status_code < 400 and not must_be_named:
            continue  # an object of open keys took it
        assert 400 <= response.status_code < 500, (method, url, field, response.text)
        message = message_of(response)
        assert not LIBRARY_WORDS.search(message), (method, url, field, message)
        if must_be_named:
            assert field in message, (method, url, field, message)
            checked += 1
    assert checked >= 90  # every operation's fields, and the fields of their objects


def test_every_query_parameter_sent_wrong_is_named_and_explained(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    document = client.get("/openapi.json").json()
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = resolve(document, parameter.get("schema", {}))
                if parameter["in"] != "query" or schema.get("type") == "string":
                    continue  # any text is a valid string; the others can be wrong
                url = re.sub(r"\{[^}]+\}", "1", path)
                response = client.request(
                    method.upper(),
                    url,
                    params={parameter["name"]: "surely-not-this"},
                    headers=admin_headers,
                )
                if response.status_code != 422:
                    continue  # a union with text in it took the value
                message = message_of(response)
                assert parameter["name"] in message, (path, parameter["name"], message)
                assert not LIBRARY_WORDS.search(message), (path, message)
                checked += 1
    assert checked > 10


ADVICE: list[tuple[dict[str, Any], str]] = [  # what new users sent, and the words back
    ({"hyperparameters": {"learning_rate": "fast"}}, 'a number above 0 and at most 0.1, or "auto"'),
    (
        {"hyperparameters": {"num_epochs": 3}},
        "num_epochs is not a field here; did you mean epochs?",
    ),
    ({"base_model": "gpt-4o-mini"}, "a Hugging Face id such as Qwen/Qwen2.5-0.5B-Instruct"),
    ({"hyperparameters": {"epochs": 0}}, 'a whole number from 1 to 100, or "auto"'),
    ({"metadata": {"team": 5}}, "metadata.team: 5 is not accepted; give text of at most 512"),
]


def test_what_new_users_got_wrong_reads_as_advice(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    pairs = [{"question": "q", "answer": "a"}]
    for body, words in ADVICE:
        response = client.post("/jobs", json={"qa_pairs": pairs, **body}, headers=admin_headers)
        assert response.status_code == 422 and words in response.json()["detail"], response.text


def test_a_json_body_sent_as_a_form_is_told_to_say_it_is_json(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """curl -d sends a form unless told otherwise: every operation that takes JSON says
    which header is missing, not what pydantic made of the bytes."""
    document = client.get("/openapi.json").json()
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            if list(content) != ["application/json"]:
                continue
            for content_type in ("application/x-www-form-urlencoded", "text/plain"):
                response = client.request(
                    method.upper(),
                    re.sub(r"\{[^}]+\}", "1", path),
                    content=json.dumps(VALID.get((method, path), {"name": "x"})),
                    headers={**admin_headers, "Content-Type": content_type},
                )
                if response.status_code in (404, 405):
                    continue  # the id 1 names nothing here: refused before the body
                message = message_of(response)
                assert response.status_code in (400, 422), (path, response.text)
                assert "body is not marked as JSON: send it with the header " in message, (
                    path,
                    message,
                )
                assert "Content-Type: application/json" in message and "b'" not in message
                checked += 1
    assert checked > 20


def test_a_pattern_with_a_length_says_the_length(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    response = client.post(
        "/users", json={**VALID[("post", "/users")], "username": "u1"}, headers=admin_headers
    )
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {
            "field": "username",
            "message": '"u1" is not accepted; give text of 3 to 64 characters',
        }
    ]


def test_a_file_where_text_was_wanted_is_called_a_file(client: TestClient) -> None:
    response = client.post(
        "/auth/token", data={"username": "admin"}, files={"password": ("pw.txt", b"secret")}
    )
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "Invalid request: password: a file is not accepted; give text"
    )


def test_the_openai_api_says_the_same_in_its_shape(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    response = client.post(
        "/v1/fine_tuning/jobs",
        json={
            "model": "builtin:tiny",
            "training_file": "file-1",
            "hyperparameters": {"n_epochs": "lots"},
        },
        headers=admin_headers,
    )
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "hyperparameters.n_epochs"
    assert error["message"] == (
        'Invalid request: hyperparameters.n_epochs: "lots" is not accepted; '
        'give a whole number from 1 to 100, or "auto"'
    )


def test_every_pattern_in_the_api_has_words(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    patterns = {
        node["pattern"] for node in schemas(document) if isinstance(node.get("pattern"), str)
    }
    assert patterns and patterns <= set(PATTERN_WORDS), patterns - set(PATTERN_WORDS)


CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
HAN = re.compile(r"[\u4e00-\u9fff]")
# Words of an English sentence (names of fields, values and paths are not among them)
ENGLISH = re.compile(
    r"\b(?:the|is|are|not|give|accepted|missing|here|must|one|of|or|and|a|an|number|whole|"
    r"least|most|above|below|found|yours|lists|should|did|you|mean)\b",
    re.IGNORECASE,
)
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")


def english_left(message: str, *names: str) -> list[str]:
    """English words of a sentence, once quoted values and the names given are taken out."""
    for name in names:
        message = message.replace(name, " ")
    return ENGLISH.findall(QUOTED.sub(" ", message))


def test_every_field_sent_wrong_is_explained_in_chinese_when_asked(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    document = client.get("/openapi.json").json()
    checked = 0
    for method, url, field, body, must_be_named in json_fields(document):
        headers = {**admin_headers, **CHINESE}
        response = client.request(method.upper(), url, json=body, headers=headers)
        if response.status_code < 400 and not must_be_named:
            continue
        assert response.headers["content-language"] == "zh-CN"
        message = message_of(response)
        assert HAN.search(message) and not english_left(message, field), (url, field, message)
        for error in response.json().get("errors", []):
            assert not english_left(error["message"], field), (url, field, error)
        checked += must_be_named
    assert checked >= 90


@pytest.mark.parametrize(
    ("method", "url", "body", "status"),
    [
        ("post", "/jobs", {"qa_pairs": [{"question": "q"}], "hyperparameters": {"epochs": 0}}, 422),
        ("post", "/jobs", {"qa_pairs": [{"question": "q", "reply": "a"}, 5]}, 422),
        ("post", "/jobs", {"dataset_id": 999_999}, 404),
        ("get", "/jobs/999999", None, 404),
        (
            "post",
            "/jobs",
            {"qa_pairs": [{"question": "q", "answer": "a"}], "base_model": "no-org/no-model"},
            409,
        ),
        ("post", "/users", {"username": "admin", "password": "kettle-marble-tulip-57"}, 409),
        ("post", "/users", {"username": "someone", "password": "password1"}, 422),
        (
            "post",
            "/v1/chat/completions",
            {"model": "nobody/nothing", "messages": [{"role": "user", "content": "hi"}]},
            404,
        ),
    ],
)
def test_what_the_service_says_is_in_chinese_when_asked(
    client: TestClient,
    admin_headers: dict[str, str],
    method: str,
    url: str,
    body: dict[str, Any] | None,
    status: int,
) -> None:
    english = client.request(method.upper(), url, json=body, headers=admin_headers)
    response = client.request(method.upper(), url, json=body, headers={**admin_headers, **CHINESE})
    assert english.status_code == response.status_code == status, response.text
    message = message_of(response)
    assert message != message_of(english) and HAN.search(message), message
    assert not english_left(message, "base_model", "qa_pairs", "dataset_id"), message
    for error in response.json().get("errors", []):
        assert not english_left(str(error.get("message"))), error


# A request of every /v1 operation with a JSON body, each of its objects filled in: every
# key in them is a field, and the same key misspelt must come back named, with the field.
OPENAI_BODIES: list[tuple[str, dict[str, Any]]] = [
    (
        "/v1/chat/completions",
        {
            "model": "builtin:tiny",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "1"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "description": "d"}}],
            "stream_options": {"include_usage": True},
            "max_tokens": 1,
            "temperature": 0,
        },
    ),
    ("/v1/completions", {"model": "builtin:tiny", "prompt": "hi", "max_tokens": 1}),
    (
        "/v1/fine_tuning/jobs",
        {
            "model": "builtin:tiny",
            "training_file": "file-1",
            "method": {"type": "dpo", "dpo": {"hyperparameters": {"n_epochs": 1, "beta": 0.1}}},
        },
    ),
    (
        "/v1/evals",
        {
            "name": "faq",
            "data_source_config": {"type": "custom", "item_schema": {"type": "object"}},
            "testing_criteria": [
                {
                    "type": "string_check",
                    "name": "exact",
                    "input": "{{ sample.output_text }}",
                    "reference": "{{ item.answer }}",
                    "operation": "eq",
                }
            ],
        },
    ),
    (
        "/v1/fine_tuning/alpha/graders/run",
        {
            "grader": {
                "type": "string_check",
                "name": "exact",
                "input": "{{ sample.output_text }}",
                "reference": "{{ item.answer }}",
                "operation": "eq",
            },
            "model_sample": "yes",
            "item": {"answer": "yes"},
        },
    ),
]
# Objects whose keys are the user's own: any key is taken there.
OPEN_KEYS = {"item", "item_schema", "metadata", "parameters"}


def misspellings(
    body: dict[str, Any], where: tuple[str | int, ...] = ()
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(the misspelt field as an error names it, the field meant, the body with it added)
    for every key of every object in `body`."""
    node: Any = body
    for step in where:
        node = node[step]
    for key, value in node.items():
        if len(key) >= 4 and key[-1] != "_":
            wrong = copy.deepcopy(body)
            target: Any = wrong
            for step in where:
                target = target[step]
            target[key[:-1]] = value
            named = ".".join(str(step) for step in (*where, key[:-1]))
            yield named, key, wrong
        if key in OPEN_KEYS:
            continue
        if isinstance(value, dict):
            yield from misspellings(body, (*where, key))
        elif isinstance(value, list):
            for index, member in enumerate(value):
                if isinstance(member, dict):
                    yield from misspellings(body, (*where, key, index))


def test_every_openai_field_misspelt_is_a_400_that_names_it_and_what_was_meant(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    checked = 0
    for url, body in OPENAI_BODIES:
        for named, meant, wrong in misspellings(body):
            response = client.post(url, json=wrong, headers=admin_headers)
            assert response.status_code == 400, (url, named, response.text)
            message = message_of(response)
            assert f"{named} is not a field here; did you mean {meant}?" in message, (url, message)
            assert not LIBRARY_WORDS.search(message), (url, message)
            checked += 1
    assert checked > 40


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("frequency_penalty", 0.5, "qatune samples without penalties"),
        ("response_format", {"type": "json_object"}, "leave 'response_format' unset"),
        ("store", True, "qatune stores no completions"),
        ("functions", [{"name": "f"}], "send 'tools' instead"),
        ("reasoning_effort", "low", "No model served here reasons"),
    ],
)
def test_openai_fields_not_served_here_are_refused_unless_they_ask_for_nothing(
    client: TestClient, admin_headers: dict[str, str], field: str, value: Any, words: str
) -> None:
    chat = {
        "model": "builtin:tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
        # OpenAI's fields that ask for nothing are taken, as a script sends them.
        "frequency_penalty": 0,
        "logit_bias": {},
        "response_format": {"type": "text"},
        "store": False,
        "user": "u-17",
        "metadata": {"team": "docs"},
        "service_tier": "auto",
    }
    taken = client.post("/v1/chat/completions", json=chat, headers=admin_headers)
    assert taken.status_code == 200, taken.text
    refused = client.post(
        "/v1/chat/completions", json={**chat, field: value}, headers=admin_headers
    )
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["param"] == field, refused.text
    assert words in error["message"]


def test_a_lone_surrogate_in_any_field_is_named_and_never_reaches_a_route(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """JSON's "\\ud800" is a Python string but no text: stored, answered or tokenized, it
    was a 500 (UTF-8 cannot carry it). Every field of every request, and every key."""
    document = client.get("/openapi.json").json()
    headers = {**admin_headers, "Content-Type": "application/json"}
    checked = 0
    for method, url, field, body, _ in json_fields(document):
        name, _, nested = field.partition(".")
        lone = {**body, name: {nested: "a\ud800"} if nested else "a\ud800"}
        sent = json.dumps(lone)  # ASCII: the surrogate as its escape, as a client sends it
        response = client.request(method.upper(), url, content=sent, headers=headers)
        assert 400 <= response.status_code < 500, (method, url, field, response.text)
        assert f"{field}: a lone surrogate" in message_of(response), (method, url, field)
        checked += 1
    assert checked >= 90
    keyed = json.dumps(
        {"qa_pairs": [{"question": "q", "answer": "a"}], "metadata": {"\udc80": "x"}}
    )
    response = client.post("/jobs", content=keyed, headers=headers)
    assert response.status_code == 422 and "metadata.\\udc80: a lone" in message_of(response)
    # json.loads also lets a surrogate through as raw bytes, and in UTF-16 or UTF-32 JSON.
    named = '{"qa_pairs": [{"question": "q", "answer": "a"}], "name": "a\ud800"}'
    for raw in (named.encode("utf-8", "surrogatepass"), named.encode("utf-16", "surrogatepass")):
        response = client.post("/jobs", content=raw, headers=headers)
        assert response.status_code == 422, response.text
        assert "name: a lone surrogate" in message_of(response)


def test_a_method_a_path_does_not_take_is_told_every_one_it_does(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """Starlette's 405 said "Method Not Allowed" with an empty Allow header: the methods of
    every route of the path, in the words and in Allow (RFC 9110 asks for the header), and
    only its own (`/jobs/estimate` is not `/jobs/{job_id}`)."""
    document = client.get("/openapi.json").json()
    checked = 0
    for path, operations in document["paths"].items():
        if "put" in operations:
            continue
        concrete = re.sub(r"\{[^}]+\}", "1", path)
        response = client.request("PUT", concrete, headers=admin_headers)
        assert response.status_code == 405, (path, response.text)
        allowed = response.headers["Allow"]
        assert set(allowed.split(", ")) == {method.upper() for method in operations}, path
        assert f"does not take PUT; use {allowed}" in message_of(response)
        checked += 1
    assert checked > 50


def test_a_path_that_leads_nowhere_says_where_to_look(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    native = client.get("/no-such-thing", headers=admin_headers)
    assert native.status_code == 404
    assert native.json()["detail"] == "Nothing is at /no-such-thing; GET /docs lists qatune's API"
    # A script written for a part of OpenAI's API that is not served learns which is.
    responses = client.post(
        "/v1/responses", json={"model": "builtin:tiny", "input": "hi"}, headers=admin_headers
    )
    assert responses.status_code == 404 and responses.headers["x-should-retry"] == "false"
    error = responses.json()["error"]
    assert error["type"] == "not_found_error"
    assert error["message"].startswith("qatune does not serve /v1/responses: of OpenAI's API")
    for served in ("/v1/chat/completions", "/v1/completions", "/v1/files", "/v1/fine_tuning"):
        assert served in error["message"]


def test_an_image_or_token_ids_are_told_qatune_reads_text(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """A script written for OpenAI's vision models, or one that sends token ids, is told
    what qatune reads, not that an image part is not a text part."""
    for part in (
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-1"}},
    ):
        content = [{"type": "text", "text": "What is on it?"}, part]
        response = client.post(
            "/v1/chat/completions",
            json={"model": "builtin:tiny", "messages": [{"role": "user", "content": content}]},
            headers=admin_headers,
        )
        error = response.json()["error"]
        assert response.status_code == 400 and error["param"] == "messages.0.content"
        assert error["message"] == (
            f"Invalid request: messages.0.content: part 1 is {part['type']}: qatune's models "
            "read text only; send the content as text"
        )
    for prompt in ([9707, 11], [[9707, 11], [1]]):
        response = client.post(
            "/v1/completions",
            json={"model": "builtin:tiny", "prompt": prompt},
            headers=admin_headers,
        )
        error = response.json()["error"]
        assert response.status_code == 400 and error["param"] == "prompt", response.text
        assert "qatune takes a prompt as text, not token ids" in error["message"]
    # Text parts and lists of texts are read as before.
    parts = [{"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]
    for path, body in (
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": parts}]}),
        ("/v1/completions", {"prompt": ["Hi", "there"]}),
    ):
        response = client.post(
            path, json={"model": "builtin:tiny", "max_tokens": 1, **body}, headers=admin_headers
        )
        assert response.status_code == 200, response.text


def test_a_body_of_many_bad_parts_is_explained_by_its_first_errors(
    client: TestClient, admin_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Explaining walks the schema for each error, on the event loop: a body of 100,000 bad
    parts (1.8 MB) took 1.5 s of it. The first MAX_EXPLAINED are named, from the start."""
    walked: list[tuple[Any, ...]] = []
    locate = validation_words._locate

    def counted(openapi: Any, operation: Any, loc: tuple[Any, ...]) -> Any:
        walked.append(loc)
        return locate(openapi, operation, loc)

    monkeypatch.setattr(validation_words, "_locate", counted)
    parts = [{"type": "text"}] * 100
    body = {"model": "m", "messages": [{"role": "user", "content": parts}] * 1000}
    refused = client.post("/v1/chat/completions", json=body, headers=admin_headers)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "messages.0.content.0.text"
    assert len(walked) == validation_words.MAX_EXPLAINED
