"""What a model's chat template can write. No torch here: job creation asks it too.

Function calling is trained through the template: the tools offered, the assistant's calls
and the tools' results are written as the model was taught to read them (Qwen's
`<tool_call>` blocks, Llama's JSON, Mistral's `[TOOL_CALLS]`). A template that writes none
of them would drop them without a word, so it is asked first, with a probe conversation.
"""

from typing import Any

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
