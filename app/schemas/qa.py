"""The JSON Schema of what qatune accepts as a QA record and a base model name.

The rules themselves live in services/datasets/qa_parsing.py (records, with the limits of
app/jobs/limits.py) and services/jobs/training_data.py (base models); these schemas say the
same in the OpenAPI document, so a client (or a fuzzer)
that follows the document sends what the API accepts, and nothing it refuses.
"""

from typing import Any

from app.core.names import BUILTIN_TINY, HUB_ID, OLLAMA_NAME, SMOLLM2
from app.jobs.limits import CHAT_ROLES, MAX_FIELD_CHARS, MAX_REWORDINGS, SHAREGPT_ROLES

# builtin:tiny, the packaged model, a hub id, or (admins; others get a 403) an absolute
# path or an Ollama model
BASE_MODEL_PATTERN = (
    rf"^({BUILTIN_TINY}|{SMOLLM2}|{HUB_ID.pattern[1:-1]}|/.+|{OLLAMA_NAME.pattern[1:-1]})$"
)

# At least one character that str.strip() keeps: what the parser calls not empty. (`\S`
# differs: an ECMA regex keeps \x1c-\x1f and \x85, which Python strips.)
NOT_BLANK = r"[^\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
TEXT: dict[str, Any] = {"type": "string", "maxLength": MAX_FIELD_CHARS, "pattern": NOT_BLANK}


# A chat message's content: text, or OpenAI's list of text parts.
CONTENT: dict[str, Any] = {
    "anyOf": [
        TEXT,
        {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
            },
        },
    ]
}


# Function calling: an assistant's calls (arguments as JSON text, as OpenAI writes them)
FUNCTION_CALL: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": TEXT, "arguments": {"type": "string"}},
}
TOOL_CALLS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["function"],
        "properties": {
            "id": {"type": "string"},
            "type": {"const": "function"},
            "function": FUNCTION_CALL,
        },
    },
}
FUNCTION: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": TEXT, "description": {"type": "string"}, "parameters": {}},
}
TOOLS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "function"],
        "properties": {"type": {"const": "function"}, "function": FUNCTION},
    },
}
# A record's tool definitions (or the older `functions`): a base whose chat template writes
# no tools refuses them when the job is created
TOOL_FIELDS: dict[str, Any] = {
    "tools": TOOLS,
    "functions": {"type": "array", "items": FUNCTION},
    "parallel_tool_calls": {"type": "boolean"},
}


def _message(*roles: str) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["role"],
        # content, or only calls (an assistant's)
        "anyOf": [
            {"required": ["content"]},
            {"required": ["tool_calls"]},
            {"required": ["function_call"]},
        ],
        "properties": {
            "role": {"enum": list(roles)},
            "content": {"anyOf": [CONTENT, {"type": "null"}]},
            "weight": {"enum": [0, 1]},  # on an assistant message: 0 keeps it as context only
            "name": {"type": "string"},
            "tool_calls": TOOL_CALLS,
            "function_call": FUNCTION_CALL,
            "tool_call_id": {"type": "string"},
        },
    }


def _one(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "maxItems": 1, "items": item}


MESSAGES: dict[str, Any] = {"type": "array", "minItems": 1, "items": _message(*CHAT_ROLES)}
ASSISTANT = _message("assistant")
# The record shapes the parser tells apart by their fields, in this order: "messages" first,
# then a preference record's "input" with an output, then question/answer, then alpaca, then
# ShareGPT's "conversations", then TRL's: "chosen" or "rejected" (with or without a prompt),
# then "prompt"/"completion".
PREFERENCE_FIELDS = [
    {"required": ["input", "preferred_output"]},
    {"required": ["input", "non_preferred_output"]},
]
# What makes a record one of the shapes tried before ShareGPT's and TRL's (read in that order).
BEFORE_HUB_SHAPES = [
    {"required": ["messages"]},
    {"required": ["question"]},
    {"required": ["answer"]},
    {"required": ["instruction"]},
    {"required": ["output"]},
    *PREFERENCE_FIELDS,
]
BEFORE_TRL_SHAPES = [*BEFORE_HUB_SHAPES, {"required": ["conversations"]}]
CHOSEN_OR_REJECTED = [{"required": ["chosen"]}, {"required": ["rejected"]}]
ANSWERS: dict[str, Any] = {"type": "array", "minItems": 1, "items": ASSISTANT}
# JSON Schema cannot say in which order turns come, so a chat record's schema holds every
# message the parser reads, and the parser's answer (a 422 naming the record and the message)
# says the rest: a system message first, each learned answer after a user message.
QA_RECORD_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "title": "QA pair",
            "type": "object",
            "required": ["question", "answer"],
            "properties": {
                "question": TEXT,
                "answer": TEXT,
                "system": {
                    "anyOf": [TEXT, {"type": "null"}],
                    "description": "the system prompt it is asked under",
                },
                "rewordings": {
                    "type": "array",
                    "maxItems": MAX_REWORDINGS,
                    "items": TEXT,
                    "description": "the question worded otherwise; each is trained as a pair "
                    "of its own with the same answer",
                },
            },
            "not": {"anyOf": [{"required": ["messages"]}, *PREFERENCE_FIELDS]},
        },
        {
            "title": "Alpaca record",
            "type": "object",
            "required": ["instruction", "output"],
            "properties": {
                "instruction": TEXT,
                "output": TEXT,
                "system": {"anyOf": [TEXT, {"type": "null"}]},
            },
            "not": {
                "anyOf": [
                    {"required": ["messages"]},
                    {"required": ["question"]},
                    {"required": ["answer"]},
                    *PREFERENCE_FIELDS,
                ]
            },
        },
        {
            "title": "Prompt-completion record (TRL's standard format, OpenAI's legacy one)",
            "type": "object",
            "required": ["prompt", "completion"],
            "properties": {"prompt": TEXT, "completion": TEXT},
            "not": {"anyOf": [*BEFORE_TRL_SHAPES, *CHOSEN_OR_REJECTED]},
        },
        {
            "title": "Prompt-completion record (TRL's conversational format): the completion's "
            "messages are the answers to learn, the prompt's assistant turns context only",
            "type": "object",
            "required": ["prompt", "completion"],
            "properties": {"prompt": MESSAGES, "completion": ANSWERS, **TOOL_FIELDS},
            "not": {"anyOf": [*BEFORE_TRL_SHAPES, *CHOSEN_OR_REJECTED]},
        },
        {
            "title": "Preference record (TRL's, with its prompt)",
            "type": "object",
            "required": ["prompt", "chosen", "rejected"],
            "anyOf": [
                {"properties": {"prompt": TEXT, "chosen": TEXT, "rejected": TEXT}},
                {
                    "properties": {
                        "prompt": MESSAGES,
                        "chosen": _one(ASSISTANT),
                        "rejected": _one(ASSISTANT),
                        **TOOL_FIELDS,
                    }
                },
            ],
            "not": {"anyOf": BEFORE_TRL_SHAPES},
        },
        {
            "title": "Preference record (TRL's implicit prompt): two conversations the same up "
            "to their last message, the answers compared",
            "type": "object",
            "required": ["chosen", "rejected"],
            "properties": {"chosen": MESSAGES, "rejected": MESSAGES, **TOOL_FIELDS},
            "not": {"anyOf": [*BEFORE_TRL_SHAPES, {"required": ["prompt"]}]},
        },
        {
            "title": "ShareGPT record (as Axolotl and LLaMA-Factory read it): a chat record",
            "type": "object",
            "required": ["conversations"],
            "properties": {
                "conversations": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["from", "value"],
                        "properties": {"from": {"enum": list(SHAREGPT_ROLES)}, "value": TEXT},
                    },
                },
                **TOOL_FIELDS,
            },
            "not": {"anyOf": BEFORE_HUB_SHAPES},
        },
        {
            "title": "Chat record (OpenAI's format): an optional system message, then user and "
            "assistant messages (and tool calls and results); each assistant message of "
            "weight 1 is an answer to learn",
            "type": "object",
            "required": ["messages"],
            "properties": {"messages": MESSAGES, **TOOL_FIELDS},
        },
        {
            "title": "Preference record (OpenAI's DPO format)",
            "type": "object",
            "required": ["input", "preferred_output", "non_preferred_output"],
            "properties": {
                "input": {
                    "type": "object",
                    "required": ["messages"],
                    "properties": {"messages": MESSAGES, **TOOL_FIELDS},
                },
                "preferred_output": {"anyOf": [_one(ASSISTANT), ASSISTANT]},
                "non_preferred_output": {"anyOf": [_one(ASSISTANT), ASSISTANT]},
            },
            "not": {"required": ["messages"]},
        },
    ]
}
