"""Invalid requests in the user's words: the field as they wrote it, what they sent, and
what is accepted, read from the same OpenAPI document they read.

pydantic says "Input should be 'auto'" for a learning rate of "fast" (one branch of a
union), "Extra inputs are not permitted" for a misspelt setting and prints the regular
expression a base model failed. Here each field's accepted values are described from its
JSON Schema (type, range, length, choices), a misspelt field is matched to the fields that
exist, and the few patterns have words of their own (PATTERN_WORDS): no library message,
regular expression or type name reaches a user.
"""

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.datastructures import UploadFile

from app.core.language import deferred, tr
from app.core.names import BUILTIN_TINY
from app.schemas.qa import BASE_MODEL_PATTERN, NOT_BLANK

Schema = dict[str, Any]

# Every `pattern` in the API's schemas, in words (tests/api/test_error_words.py checks
# that none is missing); templates, put in the request's language by tr().
PATTERN_WORDS = {
    BASE_MODEL_PATTERN: deferred(
        "{builtin}, a Hugging Face id such as Qwen/Qwen2.5-0.5B-Instruct (GET /models lists "
        "what is on offer), or (admins) an absolute path to a model directory"
    ),
    r"^[A-Za-z0-9_.-]{1,64}$": deferred("1 to 64 letters, digits, '_', '.' or '-'"),
    r"^[A-Za-z0-9_.@-]+$": deferred("letters, digits, '_', '.', '@' or '-'"),
    r"^[A-Za-z0-9_.]+$": deferred("a module name: letters, digits, '_' and '.'"),
    "^file-[0-9]+$": deferred("a file id such as file-12 (POST /v1/files gives one)"),
    NOT_BLANK: deferred("text that is not blank"),
    "^password$": deferred('"password" (OAuth2\'s password grant), or nothing'),
}
OTHER_PATTERN = deferred("text in the form the API reference shows")
# Other tools' names for a field, where spelling alone does not find ours.
ALIASES = {
    "lr": "learning_rate",
    "num_epochs": "epochs",
    "num_train_epochs": "epochs",
    "n_epochs": "epochs",
    "per_device_train_batch_size": "micro_batch_size",
    "r": "lora_r",
    "rank": "lora_r",
    "alpha": "lora_alpha",
    "target_modules": "lora_target_modules",
    "max_length": "max_seq_length",
    "model": "base_model",
    "max_new_tokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "stop_sequences": "stop",
}
# Errors explained at most: each costs a walk of the schema, on the event loop, and a body
# under the upload limit can hold 100,000 bad parts (1.5 s of them). The first ones in the
# body are named; a user fixes those and sends it again.
MAX_EXPLAINED = 1000
# What pydantic adds to an error's location for the branch of a union it tried.
BRANCH_TAGS = frozenset({"int", "float", "str", "bool", "bytes", "list", "dict", "none"})
BRANCH_PREFIXES = ("constrained-", "function-", "json-or-python", "tagged-union", "nullable")


def explain(
    openapi: Schema, path: str, method: str, errors: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """Each field at fault (as the user wrote it) -> what was wrong with it and what is
    accepted: the fields of the first MAX_EXPLAINED errors."""
    operation = _operation(openapi, path, method.lower())
    found: dict[str, str] = {}
    for error in errors[:MAX_EXPLAINED]:
        loc = tuple(error.get("loc", ()))
        if error.get("type") == "json_invalid":  # at a character, not a field
            loc = ()
        if str(error.get("type")).startswith("union_tag_"):  # the tag field itself is at fault
            loc = (*loc, str((error.get("ctx") or {}).get("discriminator", "")).strip("'"))
        place = _locate(openapi, operation, loc)
        if place.field in found:
            continue  # a union's branches each complain: one sentence says what all accept
        found[place.field] = _problem(openapi, error, place)
    # A field that has a fault inside it took a union's list or object branch: the other
    # branches' complaint at the field itself ("a list is not accepted") is not its fault.
    # (Each field's parents, once: a body of 10,000 bad parts is no quadratic walk.)
    holding = {
        field.rsplit(".", depth)[0] for field in found for depth in range(1, field.count(".") + 1)
    }
    return {field: problem for field, problem in found.items() if field not in holding}


def documented(openapi: Schema, path: str) -> list[dict[str, Schema]]:
    """The operations (by method) of each documented path template a request's path
    matches, its own first: the template with the fewest ids (`/jobs/estimate`, not
    `/jobs/{job_id}`)."""
    found = []
    for template, operations in openapi.get("paths", {}).items():
        pattern = re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            found.append((template.count("{"), operations))
    return [operations for _, operations in sorted(found, key=lambda match: match[0])]


def _operation(openapi: Schema, path: str, method: str) -> Schema:
    """The documented operation a request's path and method are."""
    matches = (ops[method] for ops in documented(openapi, path) if method in ops)
    return next(matches, {})


class _Place:
    def __init__(self, field: str, schema: Schema | None, parent: Schema | None) -> None:
        self.field = field  # as the user wrote it: "hyperparameters.epochs", "qa_pairs.2"
        self.schema = schema  # the field's JSON Schema (None: no such field)
        self.parent = parent  # the object it is (or is not) a field of


def _resolve(openapi: Schema, schema: Schema | None) -> Schema:
    while schema and "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = openapi.get("components", {}).get("schemas", {}).get(name, {})
    return schema or {}


def _branches(openapi: Schema, schema: Schema) -> list[Schema]:
    branches = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf") or []
    return [_resolve(openapi, branch) for branch in branches]


def _locate(openapi: Schema, operation: Schema, loc: tuple[Any, ...]) -> _Place:
    if not loc:
        return _Place("body", None, None)
    where, rest = loc[0], loc[1:]
    schema: Schema | None
    if where == "body":
        content: dict[str, Schema] = operation.get("requestBody", {}).get("content", {})
        body: Schema = next(iter(content.values()), {})
        schema = _resolve(openapi, body.get("schema"))
    else:  # query, path, header, cookie: the parameter, then within it
        name, rest = (rest[0], rest[1:]) if rest else ("", ())
        parameters: list[Schema] = operation.get("parameters", [])
        parameter = next((p for p in parameters if p.get("name") == name), {})
        schema = _resolve(openapi, parameter.get("schema"))
        if rest == () or not schema:
            return _Place(str(name), schema or None, None)
    names: list[str] = [] if where == "body" else [str(loc[1])]
    parent: Schema | None = None
    for part in rest:
        assert schema is not None
        properties = _properties(openapi, schema)
        if isinstance(part, int):
            items = schema.get("items") or next(
                (b["items"] for b in _branches(openapi, schema) if "items" in b), None
            )
            names.append(str(part))
            parent, schema = schema, _resolve(openapi, items) if items else {}
        elif part in properties:
            names.append(part)
            parent, schema = schema, _resolve(openapi, properties[part])
        elif part in (mapping := schema.get("discriminator", {}).get("mapping", {})):
            schema = _resolve(openapi, {"$ref": mapping[part]})  # the tagged branch it took
        elif part in BRANCH_TAGS or part.startswith(BRANCH_PREFIXES) or "[" in part:
            continue  # pydantic's name for the union branch it tried, not the user's
        elif values := _values(openapi, schema):  # an object of the user's own keys
            names.append(str(part))
            parent, schema = schema, values
        else:
            names.append(str(part))
            return _Place(".".join(names), None, schema)  # no such field
    return _Place(".".join(names) or "body", schema, parent)


def _values(openapi: Schema, schema: Schema) -> Schema | None:
    """The schema of every value of an object whose keys are the user's (labels)."""
    for candidate in [schema, *_branches(openapi, schema)]:
        values = candidate.get("additionalProperties")
        if isinstance(values, dict):
            return _resolve(openapi, values)
    return None


def _properties(openapi: Schema, schema: Schema) -> dict[str, Any]:
    properties = dict(schema.get("properties", {}))
    for branch in _branches(openapi, schema):
        properties.update(branch.get("properties", {}))
    return properties


def _problem(openapi: Schema, error: Mapping[str, Any], place: _Place) -> str:
    """What is wrong with the field, without its name: `-1 is not accepted; give …`,
    `is missing: give …` (`sentence` puts the two together)."""
    kind = error.get("type", "")
    if kind == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", "")
        return tr("is not valid JSON ({reason}): send UTF-8 JSON", reason=reason)
    if kind == "missing":
        return tr("is missing: give {accepted}", accepted=accepted(openapi, place.schema))
    if kind == "extra_forbidden" or place.schema is None:
        known = sorted(_properties(openapi, place.parent or {}))
        name = place.field.rsplit(".", 1)[-1]
        close = [ALIASES[name]] if ALIASES.get(name) in known else []
        close = close or difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = tr("; did you mean {name}?", name=close[0]) if close else ""
        fields = tr(" The fields here are: {fields}", fields=", ".join(known)) if known else ""
        return tr("is not a field here{hint}{fields}", hint=hint, fields=fields)
    if place.field == "body" and isinstance(error.get("input"), bytes):
        # Not parsed: sent as a form (curl -d's default) or as text, not as JSON.
        return tr("is not marked as JSON: send it with the header 'Content-Type: application/json'")
    if kind in ("value_error", "assertion_error"):  # our own validators' words
        message = str(error.get("msg", ""))
        return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    sent = _shown(error.get("input"))
    if kind == "union_tag_invalid":
        sent = _shown((error.get("ctx") or {}).get("tag"))
        tags = error["ctx"]["expected_tags"]
        return tr("{sent} is not accepted; give one of {choices}", sent=sent, choices=tags)
    schema = place.schema
    if kind in ("string_too_short", "string_too_long"):
        schema = _length_only(openapi, schema)  # the pattern's words would not say why
    return tr(
        "{sent} is not accepted; give {accepted}", sent=sent, accepted=accepted(openapi, schema)
    )


def _length_only(openapi: Schema, schema: Schema | None) -> Schema:
    """The text branch of `schema` with its length and without its pattern."""
    schema = _resolve(openapi, schema)
    text = next((b for b in [schema, *_branches(openapi, schema)] if b.get("type") == "string"), {})
    return {key: value for key, value in text.items() if key != "pattern"}


def sentence(field: str, problem: str) -> str:
    """The field and its problem as one sentence, for the error's summary."""
    if problem.startswith("is "):  # English only: "epochs is missing"
        return tr("{field} {problem}", field=field, problem=problem)
    return tr("{field}: {problem}", field=field, problem=problem)


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return tr("an object")
    if isinstance(value, list):
        return tr("a list")
    if isinstance(value, UploadFile):  # a form's file part where text was wanted
        return tr("a file")
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else f"{text[:37]}…"


def accepted(openapi: Schema, schema: Schema | None) -> str:
    """What a value of this JSON Schema may be, in words."""
    schema = _resolve(openapi, schema)
    branches = _branches(openapi, schema)
    if branches and "type" not in schema:
        words = [accepted(openapi, b) for b in branches if b.get("type") != "null"]
        return _one_of(list(dict.fromkeys(words)))
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return tr("one of {choices}", choices=_one_of([json.dumps(v) for v in schema["enum"]]))
    kind = schema.get("type")
    if kind == "integer":
        return _range(tr("a whole number"), schema)
    if kind == "number":
        return _range(tr("a number"), schema)
    if kind == "boolean":
        return tr("true or false")
    if kind == "string":
        if schema.get("format") == "binary":
            return tr("a file")
        if "pattern" in schema:
            described = PATTERN_WORDS.get(schema["pattern"], OTHER_PATTERN)
            return tr(described, builtin=BUILTIN_TINY)
        return _length(tr("text"), schema, "minLength", "maxLength", "characters")
    if kind == "array":
        return _length(tr("a list"), schema, "minItems", "maxItems", "items")
    if kind == "object":
        return _length(tr("an object"), schema, "minProperties", "maxProperties", "entries")
    return tr("a value as the API reference shows")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _range(kind: str, schema: Schema) -> str:
    """`kind` ("a whole number") with the bounds `schema` puts on it."""
    if "minimum" in schema and "maximum" in schema:
        low, high = _number(schema["minimum"]), _number(schema["maximum"])
        return tr("{kind} from {low} to {high}", kind=kind, low=low, high=high)
    bounds = []
    if "exclusiveMinimum" in schema:
        bounds.append(tr("above {n}", n=_number(schema["exclusiveMinimum"])))
    elif "minimum" in schema:
        bounds.append(tr("at least {n}", n=_number(schema["minimum"])))
    if "exclusiveMaximum" in schema:
        bounds.append(tr("below {n}", n=_number(schema["exclusiveMaximum"])))
    elif "maximum" in schema:
        bounds.append(tr("at most {n}", n=_number(schema["maximum"])))
    if len(bounds) == 2:
        return tr("{kind} {low} and {high}", kind=kind, low=bounds[0], high=bounds[1])
    return tr("{kind} {bound}", kind=kind, bound=bounds[0]) if bounds else kind


# The units a length counts, one and many.
UNITS = {
    "characters": (deferred("character"), deferred("characters")),
    "items": (deferred("item"), deferred("items")),
    "entries": (deferred("entry"), deferred("entries")),
}


def _length(kind: str, schema: Schema, least: str, most: str, units: str) -> str:
    """`kind` ("text") with the length `schema` allows it."""
    low, high = schema.get(least), schema.get(most)
    one, many = UNITS[units]
    if low and high:
        return tr(
            "{kind} of {low} to {high} {units}", kind=kind, low=low, high=high, units=tr(many)
        )
    if high:
        unit = tr(one if high == 1 else many)
        return tr("{kind} of at most {high} {units}", kind=kind, high=high, units=unit)
    if low:
        unit = tr(one if low == 1 else many)
        return tr("{kind} of at least {low} {units}", kind=kind, low=low, units=unit)
    return kind


def _one_of(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return tr("{first}, or {last}", first=tr(", ").join(words[:-1]), last=words[-1])
