"""What a model's chat template can write. No torch here: job creation asks it too.

Function calling is trained through the template: the tools offered, the assistant's calls
and the tools' results are written as the model was taught to read them (Qwen's
`<tool_call>` blocks, Llama's JSON, Mistral's `[TOOL_CALLS]`). A template that writes none
of them would drop them without a word, so it is asked first, with a probe conversation.
"""

import json
from dataclasses import dataclass
from typing import Any

# How many times over the search for tool calls may read an answer (_calls_in)
MAX_READS = 32
# Names no real conversation holds: each must come out of the template if it writes tools.
# Mistral's templates take only nine-character alphanumeric call ids.
_TOOL, _CALL, _RESULT, _CALL_ID = (
    "qatune_probe_tool",
    "qatune_probe_call",
    "qatune_probe_9",
    "qatune001",
)
_PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": _TOOL,
            "description": "a probe",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]
_PROBE_MESSAGES = [
    {"role": "user", "content": "?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": _CALL_ID, "type": "function", "function": {"name": _CALL, "arguments": {}}}
        ],
    },
    {"role": "tool", "content": _RESULT, "tool_call_id": _CALL_ID},
]


def renders_tools(tokenizer: Any) -> bool:
    """Whether the template writes tool definitions, tool calls and tool results."""
    try:
        text = tokenizer.apply_chat_template(
            _PROBE_MESSAGES, tools=_PROBE_TOOLS, tokenize=False, add_generation_prompt=True
        )
    except Exception:  # a template that raises on tools (or on their order) writes none
        return False
    return all(probe in text for probe in (_TOOL, _CALL, _RESULT))


@dataclass(frozen=True)
class CallWriting:
    """How the template writes an assistant's call around its JSON (Qwen's `<tool_call>`
    and `</tool_call>`, Mistral's `[TOOL_CALLS]`, nothing for Llama 3.1): what a model
    tuned on it writes back, and what is taken off the answer with the calls."""

    before: str
    after: str


def call_writing(tokenizer: Any) -> CallWriting:
    """Asked of the template: the probe call written alone, less the call's JSON."""
    prompt = _PROBE_MESSAGES[:1]
    call = _PROBE_MESSAGES[1]
    try:
        asked = tokenizer.apply_chat_template(
            prompt, tools=_PROBE_TOOLS, tokenize=False, add_generation_prompt=True
        )
        whole = tokenizer.apply_chat_template([*prompt, call], tools=_PROBE_TOOLS, tokenize=False)
    except Exception:  # a template that will not end on a call: calls are read bare
        return CallWriting("", "")
    turn = whole[len(asked) :] if whole.startswith(asked) else whole
    for token in tokenizer.all_special_tokens:  # answers are read without them
        turn = turn.replace(token, "")
    found = _calls_in(turn, {_CALL})
    if not found:
        return CallWriting("", "")
    start, end = found[0][0], found[-1][1]
    return CallWriting(turn[:start].strip(), turn[end:].strip())


@dataclass(frozen=True)
class FoundCall:
    name: str
    arguments: str  # JSON text, as OpenAI's API gives it


def find_tool_calls(
    text: str, names: set[str], writing: CallWriting
) -> tuple[str | None, list[FoundCall]]:
    """The answer's text and the calls it makes: each JSON object (or list of them) that
    names an offered tool with its arguments (or Llama's `parameters`). The text is None
    when nothing but calls and the template's writing around them is left."""
    spans = _calls_in(text, names)
    if not spans:
        return text, []
    calls = [call for _, _, found in spans for call in found]
    rest, at = [], 0
    for start, end, _ in spans:
        rest.append(text[at:start])
        at = end
    rest.append(text[at:])
    content = "".join(rest)
    for marker in (writing.before, writing.after):
        if marker:
            content = content.replace(marker, "")
    return (content.strip() or None), calls


def _calls_in(text: str, names: set[str]) -> list[tuple[int, int, list[FoundCall]]]:
    """(start, end, calls) of each JSON value in `text` that is a call or a list of them.
    Each bracket is tried as a value's start, and one that never closes is read to the end
    from each: the characters read are capped at MAX_READS times the text's length (a call
    is not looked for past that, in an answer that is no call anyway)."""
    decoder = json.JSONDecoder()
    found, at, left = [], 0, MAX_READS * len(text) + 4096
    while left > 0 and (start := _next_json(text, at)) >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError as exc:
            left -= getattr(exc, "pos", start + 1) - start
            at = start + 1
            continue
        except RecursionError:  # nested deeper than Python's stack: text, as is each bracket
            left -= len(text) - start  # how far it read, it does not say
            at = max(start + 1, _run_of_openings_end(text, start) - 1)  # of its run but the last
            continue
        left -= end - start
        items = value if isinstance(value, list) else [value]
        calls = [_call(item, names) for item in items]
        if items and all(call is not None for call in calls):
            found.append((start, end, [call for call in calls if call is not None]))
            at = end
        else:
            at = start + 1
    return found


def _run_of_openings_end(text: str, start: int) -> int:
    """Where the run of opening brackets (and the space between) from `start` ends: trying
    each of a long run again would take time quadratic in its length."""
    at = start
    while at < len(text) and text[at] in "[{ \t\n\r":
        at += 1
    return at


def _next_json(text: str, at: int) -> int:
    positions = [p for p in (text.find("{", at), text.find("[", at)) if p >= 0]
    return min(positions, default=-1)


def _call(item: Any, names: set[str]) -> FoundCall | None:
    name = item.get("name") if isinstance(item, dict) else None
    if not isinstance(name, str) or name not in names:  # a list is no name, nor hashable
        return None
    arguments = item.get("arguments", item.get("parameters"))
    if isinstance(arguments, str):  # some templates write the JSON text itself
        return FoundCall(item["name"], arguments)
    if not isinstance(arguments, dict):
        return None
    return FoundCall(item["name"], json.dumps(arguments, ensure_ascii=False))
