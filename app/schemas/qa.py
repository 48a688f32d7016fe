"""The JSON Schema of what qatune accepts as a QA record and a base model name.

The rules themselves live in services/qa_parsing.py (records, with the limits of
app/jobs/limits.py) and services/training_data.py (base models); these schemas say the
same in the OpenAPI document, so a client (or a fuzzer)
that follows the document sends what the API accepts, and nothing it refuses.
"""

from typing import Any

from app.core.names import BUILTIN_TINY, HUB_ID
from app.jobs.limits import MAX_FIELD_CHARS

# builtin:tiny, a hub id, or an absolute path (admins; others get a 403)
BASE_MODEL_PATTERN = rf"^({BUILTIN_TINY}|{HUB_ID.pattern[1:-1]}|/.+)$"

# At least one character that str.strip() keeps: what the parser calls not empty. (`\S`
# differs: an ECMA regex keeps \x1c-\x1f and \x85, which Python strips.)
NOT_BLANK = r"[^\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
TEXT: dict[str, Any] = {"type": "string", "maxLength": MAX_FIELD_CHARS, "pattern": NOT_BLANK}


def _message(role: str) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"role": {"const": role}, "content": TEXT},
    }


QA_RECORD_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "title": "QA pair",
            "type": "object",
            "required": ["question", "answer"],
            "properties": {"question": TEXT, "answer": TEXT},
            "not": {"required": ["messages"]},
        },
        {
            "title": "Alpaca record",
            "type": "object",
            "required": ["instruction", "output"],
            "properties": {"instruction": TEXT, "output": TEXT},
            "not": {
                "anyOf": [
                    {"required": ["messages"]},
                    {"required": ["question"]},
                    {"required": ["answer"]},
                ]
            },
        },
        {
            "title": "Chat record: one user turn, one assistant turn",
            "type": "object",
            "required": ["messages"],
            "properties": {
                "messages": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "prefixItems": [_message("user"), _message("assistant")],
                }
            },
        },
    ]
}
