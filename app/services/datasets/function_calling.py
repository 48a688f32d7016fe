"""Function calling in OpenAI's chat records: the tools a record offers (`tools`, or the
older `functions`) and an assistant's calls (`tool_calls`, or the older `function_call`),
each checked with its place; conversations.py reads the messages around them."""

import json
from typing import Any

from app.core.language import tr
from app.ml.pairs import ToolCall
from app.services.datasets.qa_problems import Problems, Where


def record_tools(
    record: dict[str, Any], prefix: str, where: Where, problems: Problems
) -> str | None:
    """The record's tools as JSON text in OpenAI's `tools` shape (legacy `functions` become
    tools), or None."""
    tools, functions = record.get("tools"), record.get("functions")
    if tools is not None and functions is not None:
        problems.add(
            tr('give "tools" or the older "functions", not both'), field=f"{prefix}tools", at=where
        )
        return None
    name = "tools" if functions is None else "functions"
    tools = tools if functions is None else functions
    if tools is None or tools == []:
        return None
    if not isinstance(tools, list):
        problems.add(tr('"{name}" must be a list', name=f"{prefix}{name}"), field=name, at=where)
        return None
    shaped = []
    for index, tool in enumerate(tools):
        definition = _function_definition(tool, legacy=name == "functions")
        if definition is None:
            problems.add(
                tr(
                    '{field} must be a function with a name: {{"type": "function", "function": '
                    '{{"name", "description", "parameters"}}}}',
                    field=f"{prefix}{name}[{index}]",
                ),
                field=f"{prefix}{name}[{index}]",
                at=where,
            )
            return None
        shaped.append({"type": "function", "function": definition})
    return json.dumps(shaped, ensure_ascii=False)


def _function_definition(tool: Any, legacy: bool) -> dict[str, Any] | None:
    """A tool's function ({"name", "description"?, "parameters"?}), if it has a name; legacy
    `functions` items are the function itself."""
    if not legacy:
        wrapped = isinstance(tool, dict) and tool.get("type") == "function"
        tool = tool.get("function") if wrapped else None
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return None
    return tool if tool["name"].strip() else None


def message_tool_calls(
    field: str, message: dict[str, Any], where: Where, problems: Problems
) -> tuple[ToolCall, ...] | None:
    """An assistant's `tool_calls` (or legacy `function_call`); None if they are wrong."""
    calls, legacy = message.get("tool_calls"), message.get("function_call")
    if legacy is not None:
        calls, name = [{"type": "function", "function": legacy}], "function_call"
    else:
        calls, name = calls or [], "tool_calls"
    if not isinstance(calls, list):
        calls = [None]
    parsed = []
    for position, call in enumerate(calls):
        made = _call(call)
        if made is None:
            place = f"{field}.{name}" + (f"[{position}]" if name == "tool_calls" else "")
            problems.add(
                tr(
                    '{field} must be {{"id", "type": "function", "function": {{"name", '
                    '"arguments"}}}}, its arguments JSON text',
                    field=place,
                ),
                field=place,
                at=where,
            )
            return None
        parsed.append(made)
    return tuple(parsed)


def _call(call: Any) -> ToolCall | None:
    """One item of `tool_calls`, if it is well formed."""
    if not isinstance(call, dict) or call.get("type", "function") != "function":
        return None
    function, call_id = call.get("function"), call.get("id")
    if not isinstance(function, dict) or not isinstance(call_id, str | None):
        return None
    name, arguments = function.get("name"), function.get("arguments", "{}")
    if not isinstance(name, str) or not name.strip() or not isinstance(arguments, str):
        return None
    return ToolCall(name, arguments, call_id)
