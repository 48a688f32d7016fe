"""Function calling when a model is asked: the tools go into the prompt through the model's
chat template, as they did in training, and the calls it writes come back as OpenAI's
`tool_calls`, read the way the same template writes them (app/ml/chat_template.py)."""

from dataclasses import dataclass
from typing import Any, cast

from app.core.errors import BadRequest
from app.core.language import tr
from app.jobs.limits import template_role
from app.ml.chat_template import (
    CallWriting,
    FoundCall,
    call_writing,
    find_tool_calls,
    renders_tools,
)
from app.ml.pairs import Role, ToolCall, Turn


@dataclass(frozen=True)
class ToolUse:
    """The tools one request offers, and how its model writes a call."""

    names: frozenset[str]
    writing: CallWriting

    def split(self, answer: str) -> tuple[str | None, list[FoundCall]]:
        """The answer's text (None if it only calls) and its calls."""
        return find_tool_calls(answer, set(self.names), self.writing)


def tool_use_for(tokenizer: Any, base_model: str, tools: list[dict[str, Any]]) -> ToolUse:
    """How a model with this tokenizer takes `tools`; a 400 if its template writes none."""
    if not renders_tools(tokenizer):
        raise BadRequest(
            tr(
                "The chat template of {base_model} writes no tools, so its models cannot be "
                "offered any: send no 'tools', or use a model on a base whose template writes "
                "them (Qwen2.5, Llama 3.1 and Mistral instruct models do)",
                base_model=base_model,
            ),
            param="tools",
        )
    names = frozenset(tool["function"]["name"] for tool in tools)
    return ToolUse(names, call_writing(tokenizer))


def chat_message(
    role: str, content: str, tool_calls: list[tuple[str, str, str]], tool_call_id: str | None
) -> dict[str, Any]:
    """One message of a conversation sent to be answered, as the chat template takes it:
    an assistant's calls as (id, name, arguments JSON text), with their arguments as objects
    (as in training)."""
    said = cast(Role, template_role(role))
    calls = tuple(ToolCall(name, arguments, id) for id, name, arguments in tool_calls)
    return Turn(said, content, calls, tool_call_id).to_message()
