"""OpenAI's chat fine-tuning records: a conversation, and the answers it teaches; and its
preference records (DPO): a conversation, a preferred and a non-preferred answer.

OpenAI's rule: every assistant message is a training target in the context of everything
said before it; `"weight": 0` leaves one out (it stays in the context of later ones). So a
record with three assistant messages becomes three pairs, each with the earlier turns as
its history. What qatune does not train (tools, function calls, images, audio) is a problem
named with its place, never dropped in silence.
"""

from dataclasses import dataclass
from typing import Any

from app.core.language import deferred, tr
from app.jobs.limits import CHAT_ROLES
from app.ml.pairs import QAPair, Role, Turn
from app.services.qa_problems import Problems, Where, text_field

UNTRAINED_RECORD_FIELDS = {
    "tools": deferred("tool definitions"),
    "functions": deferred("function definitions"),
}
UNTRAINED_MESSAGE_FIELDS = {
    "tool_calls": deferred("tool calls"),
    "function_call": deferred("a function call"),
}
NOT_TRAINED = deferred(
    "qatune trains text conversations only: remove the record or train it elsewhere"
)


def conversation_pairs(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    """The pairs of one {"messages": [...]} record, or its problems (and no pairs)."""
    found = problems.total
    for name, what in UNTRAINED_RECORD_FIELDS.items():
        if record.get(name):
            problems.add(
                tr(
                    '"{name}": {what} are not trained here; {not_trained}',
                    name=name,
                    what=tr(what),
                    not_trained=tr(NOT_TRAINED),
                ),
                field=name,
                at=where,
            )
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
    return _pairs([t for t in turns if t is not None], record, where, problems)


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
        shown = str(role)[:20]
        problems.add(
            tr(
                "{field}.role is {role!r}; use system, user or assistant (tool results are "
                "not trained here; {not_trained})",
                field=field,
                role=shown,
                not_trained=tr(NOT_TRAINED),
            )
            if role in ("tool", "function")
            else tr(
                "{field}.role is {role!r}; use system, user or assistant", field=field, role=shown
            ),
            field=f"{field}.role",
            at=where,
        )
        return None
    for name, what in UNTRAINED_MESSAGE_FIELDS.items():
        if message.get(name):
            problems.add(
                tr(
                    "{field}.{name}: {what} are not trained here; {not_trained}",
                    field=field,
                    name=name,
                    what=tr(what),
                    not_trained=tr(NOT_TRAINED),
                ),
                field=f"{field}.{name}",
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
    content = _content(field, message.get("content"), where, problems)
    if content is None:
        return None
    said: Role = "system" if role == "developer" else role
    return _Said(index, said, content, learned=role == "assistant" and weight == 1)


@dataclass(frozen=True)
class _Said:
    index: int  # in the record's messages
    role: Role
    content: str
    learned: bool  # an assistant message of weight 1


def _content(field: str, content: Any, where: Where, problems: Problems) -> str | None:
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
    return text_field(f"{field}.content", content, where, problems)


def _pairs(
    said: list[_Said], record: dict[str, Any], where: Where, problems: Problems
) -> list[QAPair]:
    system = said[0].content if said and said[0].role == "system" else None
    conversation = said[1:] if system is not None else said
    pairs = []
    for position, answer in enumerate(conversation):
        if not answer.learned:
            continue
        question = conversation[position - 1] if position else None
        if question is None or question.role != "user":
            before = f"messages[{question.index}] is {question.role}" if question else "none"
            problems.add(
                tr(
                    "messages[{index}]: an assistant message to learn must follow a user message "
                    "({before}); join the two, or give the first weight 0",
                    index=answer.index,
                    before=before,
                ),
                field=f"messages[{answer.index}]",
                at=where,
            )
            return []
        history = tuple(Turn(t.role, t.content) for t in conversation[: position - 1])
        pairs.append(QAPair(question.content, answer.content, system, history))
    if not pairs and conversation and conversation[-1].role == "user":
        # OpenAI's reinforcement record: the prompt alone, and fields its grader reads
        last = conversation[-1]
        history = tuple(Turn(t.role, t.content) for t in conversation[:-1])
        return [QAPair(last.content, "", system, history, item=record)]
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


def preference_pair(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    """{"input": {"messages"}, "preferred_output": [assistant], "non_preferred_output":
    [assistant]}: the conversation so far must end with the user's message."""
    found = problems.total
    given = record.get("input")
    if not isinstance(given, dict) or not isinstance(given.get("messages"), list):
        problems.add(tr('"input" must be an object with "messages"'), field="input", at=where)
        return []
    for name, what in UNTRAINED_RECORD_FIELDS.items():
        if given.get(name):
            problems.add(
                tr(
                    '"input.{name}": {what} are not trained here; {not_trained}',
                    name=name,
                    what=tr(what),
                    not_trained=tr(NOT_TRAINED),
                ),
                field=f"input.{name}",
                at=where,
            )
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
    if preferred == rejected:
        problems.add(
            tr("the preferred and non-preferred outputs are the same: nothing to learn"),
            field="non_preferred_output",
            at=where,
        )
        return []
    history = tuple(Turn(t.role, t.content) for t in conversation[:-1])
    return [QAPair(conversation[-1].content, preferred, system, history, rejected)]


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
    return said.content if said is not None else None
