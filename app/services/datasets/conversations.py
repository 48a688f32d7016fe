"""OpenAI's chat fine-tuning records: a conversation, and the answers it teaches; and its
preference records (DPO): a conversation, a preferred and a non-preferred answer.

OpenAI's rule: every assistant message is a training target in the context of everything
said before it; `"weight": 0` leaves one out (it stays in the context of later ones). So a
record with three assistant messages becomes three pairs, each with the earlier turns as
its history. Function calling is trained too: the record's `tools` (or legacy
`functions`), an assistant's `tool_calls` (or `function_call`), a tool's result (`tool` or
legacy `function` messages); whether the base model's chat template can write them is
checked when a job is created (example_checks.py). What qatune does not train (images,
audio, files) is a problem named with its place, never dropped in silence.
"""

from dataclasses import dataclass
from typing import Any, cast

from app.core.language import deferred, tr
from app.jobs.limits import CHAT_ROLES, template_role
from app.ml.pairs import QAPair, Role, ToolCall, Turn
from app.services.datasets.function_calling import message_tool_calls, record_tools
from app.services.datasets.qa_problems import Problems, Where, answers_differ, text_field

NOT_TRAINED = deferred(
    "qatune trains text conversations only: remove the record or train it elsewhere"
)


def conversation_pairs(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    """The pairs of one {"messages": [...]} record, or its problems (and no pairs)."""
    found = problems.total
    tools = record_tools(record, "", where, problems)
    messages = record["messages"]
    if not isinstance(messages, list) or not messages:
        problems.add(
            tr('"messages" must be a non-empty list of {"role", "content"} objects'),
            field="messages",
            at=where,
        )
        return []
    turns = [_message(index, m, where, problems) for index, m in enumerate(messages)]
    if problems.total > found:
        return []
    return _pairs([t for t in turns if t is not None], record, tools, where, problems)


def _message(
    index: int, message: Any, where: Where, problems: Problems, prefix: str = "messages"
) -> "_Said | None":
    field = f"{prefix}[{index}]"
    if not isinstance(message, dict):
        problems.add(
            tr("{field} must be an object with a role and a content", field=field),
            field=field,
            at=where,
        )
        return None
    role = message.get("role")
    if role not in CHAT_ROLES:
        problems.add(
            tr(
                "{field}.role is {role!r}; use system, user, assistant or tool",
                field=field,
                role=str(role)[:20],
            ),
            field=f"{field}.role",
            at=where,
        )
        return None
    calls = message_tool_calls(field, message, where, problems) if role == "assistant" else ()
    if calls is None:
        return None
    if role != "assistant" and (message.get("tool_calls") or message.get("function_call")):
        problems.add(
            tr("{field}: only an assistant message calls tools", field=field),
            field=f"{field}.tool_calls",
            at=where,
        )
        return None
    call_id = message.get("tool_call_id")
    if call_id is not None and (role != "tool" or not isinstance(call_id, str)):
        problems.add(
            tr("{field}.tool_call_id must be text, on a tool message", field=field),
            field=f"{field}.tool_call_id",
            at=where,
        )
        return None
    if role == "function" and not (isinstance(message.get("name"), str) and message["name"]):
        problems.add(
            tr("{field}: a function message names its function (name)", field=field),
            field=f"{field}.name",
            at=where,
        )
        return None
    if not isinstance(message.get("name", ""), str):
        problems.add(
            tr("{field}.name must be text (who said it)", field=field),
            field=f"{field}.name",
            at=where,
        )
        return None
    weight = message.get("weight", 1)
    wrong = isinstance(weight, bool) or weight not in (0, 1)  # true == 1 in Python, not JSON
    if "weight" in message and (role != "assistant" or wrong):
        problems.add(
            tr(
                "{field}.weight is {value}; a weight is 0 or 1, on assistant messages (0: not "
                "learned, kept as context)",
                field=field,
                value=str(weight)[:20],
            ),
            field=f"{field}.weight",
            at=where,
        )
        return None
    given = message.get("content")
    if calls and given is None:
        content: str | None = ""  # a message that only calls tools
    else:
        content = _content(field, given, where, problems, empty=bool(calls))
    if content is None:
        return None
    said = cast(Role, template_role(role))
    learned = role == "assistant" and weight == 1
    return _Said(index, said, content, learned, calls, call_id)


@dataclass(frozen=True)
class _Said:
    index: int  # in the record's messages
    role: Role
    content: str
    learned: bool  # an assistant message of weight 1
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    @property
    def turn(self) -> Turn:
        return Turn(self.role, self.content, self.tool_calls, self.tool_call_id)


def _content(
    field: str, content: Any, where: Where, problems: Problems, empty: bool = False
) -> str | None:
    """A string, or OpenAI's list of parts when all of them are text."""
    if isinstance(content, list):
        kinds = {part.get("type") if isinstance(part, dict) else None for part in content}
        if kinds != {"text"}:
            other = sorted(str(kind) for kind in kinds - {"text"})
            problems.add(
                tr(
                    "{field}.content has parts of type {value}; only text is trained here (images, "
                    "audio and files are not); {not_trained}",
                    field=field,
                    value=", ".join(other),
                    not_trained=tr(NOT_TRAINED),
                ),
                field=f"{field}.content",
                at=where,
            )
            return None
        if not all(isinstance(part.get("text", ""), str) for part in content):
            problems.add(
                tr('{field}.content: each part\'s "text" must be text', field=field),
                field=f"{field}.content",
                at=where,
            )
            return None
        content = "".join(part.get("text", "") for part in content)
    if empty and content == "":
        return content  # beside tool calls
    return text_field(f"{field}.content", content, where, problems)


def _pairs(
    said: list[_Said], record: dict[str, Any], tools: str | None, where: Where, problems: Problems
) -> list[QAPair]:
    system = said[0].content if said and said[0].role == "system" else None
    conversation = said[1:] if system is not None else said
    ends_asking = bool(conversation) and conversation[-1].role == "user"
    if ends_asking and set(record) - CHAT_RECORD_FIELDS:
        return [_prompt(conversation, system, record, tools)]
    pairs = []
    for position, answer in enumerate(conversation):
        if not answer.learned:
            continue
        before = conversation[position - 1] if position else None
        asked = max((i for i in range(position) if conversation[i].role == "user"), default=None)
        if before is None or before.role not in ("user", "tool") or asked is None:
            shown = f"messages[{before.index}] is {before.role}" if before else "none"
            problems.add(
                tr(
                    "messages[{index}]: an assistant message to learn must follow a user message "
                    "or a tool's result ({before}); join the two, or give the first weight 0",
                    index=answer.index,
                    before=shown,
                ),
                field=f"messages[{answer.index}]",
                at=where,
            )
            return []
        pairs.append(
            QAPair(
                conversation[asked].content,
                answer.content,
                system,
                history=tuple(t.turn for t in conversation[:asked]),
                tools=tools,
                tool_turns=tuple(t.turn for t in conversation[asked + 1 : position]),
                answer_tool_calls=answer.tool_calls,
            )
        )
    if not pairs and ends_asking:
        return [_prompt(conversation, system, record, tools)]
    if not pairs:
        problems.add(
            tr(
                "no assistant message to learn: a conversation needs one with weight 1 (the "
                "default), or ends with the user's message (a reinforcement prompt)"
            ),
            field="messages",
            at=where,
        )
    return pairs


# The fields of OpenAI's chat records; a record with others beside a conversation that ends
# with the user's message is a reinforcement record, those fields its grader's.
CHAT_RECORD_FIELDS = frozenset({"messages", "tools", "parallel_tool_calls", "functions"})


def _prompt(
    conversation: list[_Said], system: str | None, record: dict[str, Any], tools: str | None
) -> QAPair:
    """OpenAI's reinforcement record: the conversation so far (earlier assistant turns as
    context, not as answers to learn) is the prompt, the record is the grader's `item`."""
    history = tuple(t.turn for t in conversation[:-1])
    return QAPair(conversation[-1].content, "", system, history, item=record, tools=tools)


def preference_pair(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    """{"input": {"messages"}, "preferred_output": [assistant], "non_preferred_output":
    [assistant]}: the conversation so far must end with the user's message."""
    found = problems.total
    given = record.get("input")
    if not isinstance(given, dict) or not isinstance(given.get("messages"), list):
        problems.add(tr('"input" must be an object with "messages"'), field="input", at=where)
        return []
    tools = record_tools(given, "input.", where, problems)
    said = [
        _message(i, m, where, problems, prefix="input.messages")
        for i, m in enumerate(given["messages"])
    ]
    answers = [_output(name, record.get(name), where, problems) for name in OUTPUTS]
    if problems.total > found:
        return []
    turns = [t for t in said if t is not None]
    system = turns[0].content if turns and turns[0].role == "system" else None
    conversation = turns[1:] if system is not None else turns
    if not conversation or conversation[-1].role != "user":
        problems.add(
            tr('"input.messages" must end with the user\'s message that the outputs answer'),
            field="input.messages",
            at=where,
        )
        return []
    preferred, rejected = answers
    assert preferred is not None and rejected is not None
    if not answers_differ(preferred, rejected, "non_preferred_output", where, problems):
        return []
    history = tuple(t.turn for t in conversation[:-1])
    return [QAPair(conversation[-1].content, preferred, system, history, rejected, tools=tools)]


OUTPUTS = ("preferred_output", "non_preferred_output")


def _output(name: str, value: Any, where: Where, problems: Problems) -> str | None:
    """One assistant message, as a list of one (OpenAI's shape) or the message itself."""
    message = value[0] if isinstance(value, list) and len(value) == 1 else value
    if not isinstance(message, dict) or message.get("role") != "assistant":
        problems.add(
            tr('"{name}" must be a list of one assistant message', name=name), field=name, at=where
        )
        return None
    said = _message(0, message, where, problems, prefix=name)
    if said is not None and said.tool_calls:
        problems.add(
            tr(
                '"{name}": a preferred or non-preferred output is text; tool calls are not '
                "compared here",
                name=name,
            ),
            field=f"{name}.tool_calls",
            at=where,
        )
        return None
    return said.content if said is not None else None
