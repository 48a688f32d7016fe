"""A question-answer pair: what a job trains on. No torch here: parsing reads it too."""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app.core.json_text import parse_json

# A later system message stays in place; a tool message is a tool's result
Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """A function the assistant calls (OpenAI's `tool_calls` item, or a `function_call`)."""

    name: str
    arguments: str  # JSON text, as OpenAI's records give it
    id: str | None = None

    def to_message(self) -> dict[str, Any]:
        """As chat templates read it: `arguments` an object where it is one (Qwen's, Llama's
        and Mistral's templates write it out as JSON; a string would be quoted twice)."""
        try:
            arguments: Any = parse_json(self.arguments)
        except ValueError:
            arguments = self.arguments
        call: dict[str, Any] = {"type": "function"}
        if self.id is not None:
            call["id"] = self.id
        return call | {"function": {"name": self.name, "arguments": arguments}}

    def to_record(self) -> dict[str, str]:
        record = {"name": self.name, "arguments": self.arguments}
        return record | ({"id": self.id} if self.id is not None else {})

    @classmethod
    def from_record(cls, record: dict[str, str]) -> "ToolCall":
        return cls(record["name"], record["arguments"], record.get("id"))


@dataclass(frozen=True)
class Turn:
    """One earlier message of a conversation, before the answer being learned."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant's calls
    tool_call_id: str | None = None  # a tool result's call

    def to_message(self) -> dict[str, Any]:
        return self._as(ToolCall.to_message)

    def to_record(self) -> dict[str, Any]:
        return self._as(ToolCall.to_record)

    def _as(self, call_as: Callable[[ToolCall], dict[str, Any]]) -> dict[str, Any]:
        """The turn's fields, its calls each as `call_as` writes one (a message or a record)."""
        turn: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            turn["tool_calls"] = [call_as(call) for call in self.tool_calls]
        if self.tool_call_id is not None:
            turn["tool_call_id"] = self.tool_call_id
        return turn

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Turn":
        calls = tuple(map(ToolCall.from_record, record.get("tool_calls", ())))
        return cls(record["role"], record["content"], calls, record.get("tool_call_id"))

    @property
    def text_chars(self) -> int:
        calls = sum(len(c.name) + len(c.arguments) for c in self.tool_calls)
        return len(self.content) + calls


@dataclass(frozen=True)
class QAPair:
    """One answer to learn, in the context of everything said before it: an optional system
    prompt, the earlier turns of a conversation (none for a plain pair), the question."""

    question: str
    answer: str  # the answer to learn (a preference record's preferred one)
    system: str | None = None  # an OpenAI chat record's system message
    history: tuple[Turn, ...] = ()
    rejected: str | None = None  # a preference record's non-preferred answer (DPO)
    # A reinforcement record's own fields, which graders read as {{item.…}}; None: the
    # pair's record itself ({{item.question}}, {{item.answer}})
    item: dict[str, Any] | None = field(default=None, compare=False)
    # Function calling: the tools the conversation offers (OpenAI's `tools`, as JSON text),
    # the calls and results between the question and the answer, and the answer's own calls
    tools: str | None = None
    tool_turns: tuple[Turn, ...] = ()
    answer_tool_calls: tuple[ToolCall, ...] = ()

    def prompt_messages(self) -> list[dict[str, Any]]:
        """The conversation up to the answer, as a chat template takes it."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        earlier = [turn.to_message() for turn in self.history]
        later = [turn.to_message() for turn in self.tool_turns]
        return [*system, *earlier, {"role": "user", "content": self.question}, *later]

    def messages(self) -> list[dict[str, Any]]:
        answer = Turn("assistant", self.answer, self.answer_tool_calls)
        return [*self.prompt_messages(), answer.to_message()]

    def tool_definitions(self) -> list[dict[str, Any]] | None:
        """The tools, as a chat template's `tools` argument takes them."""
        return json.loads(self.tools) if self.tools else None

    @property
    def uses_tools(self) -> bool:
        """Whether only a chat template that renders tools can write this pair."""
        turns = (*self.history, *self.tool_turns)
        return bool(self.tools or self.answer_tool_calls or self.tool_turns) or any(
            turn.role == "tool" or turn.tool_calls for turn in turns
        )

    def rejected_pair(self) -> "QAPair":
        """The same prompt with the non-preferred answer (DPO's other half)."""
        assert self.rejected is not None
        return QAPair(
            self.question,
            self.rejected,
            self.system,
            self.history,
            tools=self.tools,
            tool_turns=self.tool_turns,
        )

    def to_record(self) -> dict[str, object]:
        """The form qatune stores: {"question", "answer", "system"?, "history"?, …}."""
        record: dict[str, object] = {"question": self.question, "answer": self.answer}
        if self.system:
            record["system"] = self.system
        if self.history:
            record["history"] = [turn.to_record() for turn in self.history]
        if self.rejected is not None:
            record["rejected"] = self.rejected
        if self.item is not None:
            record["item"] = self.item
        if self.tools:
            record["tools"] = self.tools
        if self.tool_turns:
            record["tool_turns"] = [turn.to_record() for turn in self.tool_turns]
        if self.answer_tool_calls:
            record["answer_tool_calls"] = [call.to_record() for call in self.answer_tool_calls]
        return record

    @property
    def prompt_only(self) -> bool:
        """A reinforcement prompt: no answer to learn, fields for its grader."""
        return self.item is not None and not self.answer

    @property
    def grader_item(self) -> dict[str, Any]:
        """What a grader reads as `item`."""
        if self.item is not None:
            return self.item
        return {k: v for k, v in self.to_record().items() if k != "item"}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "QAPair":
        """A record `to_record` wrote (already validated)."""
        history = tuple(map(Turn.from_record, record.get("history", ())))
        system, rejected = record.get("system"), record.get("rejected")
        return cls(
            record["question"],
            record["answer"],
            system,
            history,
            rejected,
            record.get("item"),
            tools=record.get("tools"),
            tool_turns=tuple(map(Turn.from_record, record.get("tool_turns", ()))),
            answer_tool_calls=tuple(map(ToolCall.from_record, record.get("answer_tool_calls", ()))),
        )

    @property
    def text_chars(self) -> int:
        """Characters of all its text: what its tokens are estimated from."""
        turns = sum(turn.text_chars for turn in (*self.history, *self.tool_turns))
        answer = Turn("assistant", self.answer, self.answer_tool_calls).text_chars
        extra = len(self.rejected or "") + len(self.tools or "") + len(self.system or "")
        return len(self.question) + answer + turns + extra


def shared_system_prompt(pairs: list[QAPair]) -> str | None:
    """The system prompt every pair has, if they all have the same one."""
    systems = {pair.system for pair in pairs}
    return systems.pop() if len(systems) == 1 else None


DataKind = Literal["qa", "chat", "tools", "preference", "reinforcement"]


def data_kind(pairs: Sequence[QAPair]) -> DataKind:
    """What a file holds, as a person would name it: reinforcement prompts, preference
    pairs, conversations with tools, conversations, or question-answer pairs."""
    if pairs and all(pair.prompt_only for pair in pairs):
        return "reinforcement"
    if pairs and all(pair.rejected is not None for pair in pairs):
        return "preference"
    if any(pair.tools or pair.tool_turns or pair.answer_tool_calls for pair in pairs):
        return "tools"
    if any(pair.history or pair.system for pair in pairs):
        return "chat"
    return "qa"
