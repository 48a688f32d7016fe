"""`{{ item.x }}` and `{{ sample.output_text }}` in a grader's strings, rendered as OpenAI does.

A variable is a namespace (`item` or `sample`) and a JSON path: `item.answer`,
`item.facts[0].name`, `item["a key"]`. A string renders as it is, anything else as JSON.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

from app.core.language import tr

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
STEP = re.compile(r"""\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]""")
HEAD = re.compile(r"\s*([A-Za-z_]\w*)")
SAMPLE_FIELDS = ("output_text", "output_json", "output_tools", "choices")
NAMESPACES = ("item", "sample")
Step = str | int


@dataclass(frozen=True)
class Variable:
    text: str  # as written, for messages
    namespace: str
    path: tuple[Step, ...]


class MissingVariable(Exception):
    """A variable whose value the item or sample does not have."""

    def __init__(self, variable: Variable, why: str) -> None:
        super().__init__(f"{{{{ {variable.text} }}}}: {why}")
        self.variable = variable


def variables(template: str) -> list[Variable]:
    """The template's variables; ValueError names the first one written wrong."""
    return [_parse(match.group(1)) for match in PLACEHOLDER.finditer(template)]


def _parse(text: str) -> Variable:
    text = text.strip()
    head = HEAD.match(text)
    if head is None or head.group(1) not in NAMESPACES:
        raise ValueError(
            tr(
                "the template variable {{{{ {text} }}}} must start with 'item.' or 'sample.'",
                text=text[:80],
            )
        )
    path: list[Step] = []
    at = head.end()
    while at < len(text):
        step = STEP.match(text, at)
        if step is None:
            raise ValueError(
                tr(
                    "the template variable {{{{ {text} }}}} cannot be read at {at!r}: write "
                    'item.field, item.list[0] or item["a key"]',
                    text=text[:80],
                    at=text[at : at + 20],
                )
            )
        name, index, quoted = step.groups()
        path.append(int(index) if index is not None else name if name is not None else quoted)
        at = step.end()
    namespace = head.group(1)
    if namespace == "sample" and (not path or path[0] not in SAMPLE_FIELDS):
        raise ValueError(
            f"the template variable {{{{ {text[:80]} }}}} names no field of the sample: it has "
            + ", ".join(SAMPLE_FIELDS)
        )
    return Variable(text, namespace, tuple(path))


def render(template: str, namespaces: dict[str, Any]) -> str:
    """The template with each variable's value; MissingVariable if one has none."""

    def value(match: re.Match[str]) -> str:
        variable = _parse(match.group(1))
        found = _lookup(variable, namespaces)
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return PLACEHOLDER.sub(value, template)


def value_of(path: str, namespaces: dict[str, Any]) -> Any:
    """The value at `item.messages`-style path (ValueError if written wrong, MissingVariable
    if absent), as it is: not rendered to text."""
    return _lookup(_parse(path), namespaces)


def _lookup(variable: Variable, namespaces: dict[str, Any]) -> Any:
    value = namespaces.get(variable.namespace)
    walked = variable.namespace
    for step in variable.path:
        if isinstance(step, int) and isinstance(value, list) and step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict) and step in value:
            value = value[step]
        else:
            raise MissingVariable(variable, f"{walked} has no {step!r}")
        walked += f"[{step}]" if isinstance(step, int) else f".{step}"
    if value is None and variable.path[:1] == ("output_json",):
        raise MissingVariable(variable, "the sample is not JSON")
    return value
