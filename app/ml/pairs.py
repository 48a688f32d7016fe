"""A question-answer pair: what a job trains on. No torch here: parsing reads it too."""

from dataclasses import dataclass


@dataclass(frozen=True)
class QAPair:
    question: str
    answer: str
    system: str | None = None  # an OpenAI chat record's system message

    def prompt_messages(self) -> list[dict[str, str]]:
        """The conversation up to the answer, as a chat template takes it."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": self.question}]

    def messages(self) -> list[dict[str, str]]:
        return [*self.prompt_messages(), {"role": "assistant", "content": self.answer}]


def shared_system_prompt(pairs: list[QAPair]) -> str | None:
    """The system prompt every pair has, if they all have the same one."""
    systems = {pair.system for pair in pairs}
    return systems.pop() if len(systems) == 1 else None
