"""A question-answer pair: what a job trains on. No torch here: parsing reads it too."""

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]  # a later system message stays in place


@dataclass(frozen=True)
class Turn:
    """One earlier message of a conversation, before the question being answered."""

    role: Role
    content: str


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

    def prompt_messages(self) -> list[dict[str, str]]:
        """The conversation up to the answer, as a chat template takes it."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        earlier = [{"role": turn.role, "content": turn.content} for turn in self.history]
        return [*system, *earlier, {"role": "user", "content": self.question}]

    def messages(self) -> list[dict[str, str]]:
        return [*self.prompt_messages(), {"role": "assistant", "content": self.answer}]

    def rejected_pair(self) -> "QAPair":
        """The same prompt with the non-preferred answer (DPO's other half)."""
        assert self.rejected is not None
        return QAPair(self.question, self.rejected, self.system, self.history)

    def to_record(self) -> dict[str, object]:
        """The form qatune stores: {"question", "answer", "system"?, "history"?}."""
        record: dict[str, object] = {"question": self.question, "answer": self.answer}
        if self.system:
            record["system"] = self.system
        if self.history:
            record["history"] = [{"role": t.role, "content": t.content} for t in self.history]
        if self.rejected is not None:
            record["rejected"] = self.rejected
        if self.item is not None:
            record["item"] = self.item
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
        history = tuple(Turn(t["role"], t["content"]) for t in record.get("history", ()))
        system, rejected = record.get("system"), record.get("rejected")
        return cls(
            record["question"], record["answer"], system, history, rejected, record.get("item")
        )

    @property
    def text_chars(self) -> int:
        """Characters of all its text: what its tokens are estimated from."""
        earlier = sum(len(turn.content) for turn in self.history) + len(self.rejected or "")
        return len(self.question) + len(self.answer) + len(self.system or "") + earlier


def shared_system_prompt(pairs: list[QAPair]) -> str | None:
    """The system prompt every pair has, if they all have the same one."""
    systems = {pair.system for pair in pairs}
    return systems.pop() if len(systems) == 1 else None
