"""Records as datasets on the Hugging Face hub hold them, read as the records qatune reads
already, so that such a dataset uploads as it is.

TRL's formats (huggingface.co/docs/trl/dataset_formats):
- prompt/completion, in text: a QA pair (OpenAI's legacy fine-tuning format too).
- prompt/completion as lists of messages: an OpenAI chat record, the completion's messages
  the answers to learn and the prompt's assistant turns context only, as TRL trains them.
- prompt/chosen/rejected: a preference pair, in text or with messages.
- chosen/rejected conversations without a prompt: the turns both share are the prompt
  (TRL's implicit prompt, as most preference sets on the hub are written).

ShareGPT's `{"conversations": [{"from": "human" | "gpt" | "system", "value"}]}` (as
Axolotl and LLaMA-Factory read it): an OpenAI chat record.

Problems in a conversational record are named as the OpenAI record it is read as:
`messages[i]` for prompt and completion numbered as one conversation, or for ShareGPT's
turns; `input.messages`, `preferred_output` and `non_preferred_output` for a preference
record's parts.
"""

from typing import Any, TypeGuard

from app.core.language import tr
from app.jobs.limits import SHAREGPT_ROLES
from app.ml.pairs import QAPair
from app.services.datasets.conversations import conversation_pairs, preference_pair
from app.services.datasets.qa_problems import Problems, Where, answers_differ, text_field

TRL_FIELDS = frozenset({"prompt", "completion", "chosen", "rejected"})

Messages = list[dict[str, Any]]
TOOL_FIELDS = ("tools", "functions", "parallel_tool_calls")  # beside the conversation


def is_hub_record(record: dict[str, Any]) -> bool:
    return "conversations" in record or not TRL_FIELDS.isdisjoint(record)


def hub_pairs(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    """The pairs of one such record (`is_hub_record`), or its problems (and no pairs)."""
    if "conversations" in record:
        return _share_gpt(record, where, problems)
    if "chosen" in record or "rejected" in record:
        return _preference(record, where, problems)
    return _prompt_completion(record, where, problems)


def _share_gpt(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    turns = record["conversations"]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, dict) for t in turns):
        problems.add(
            tr('"conversations" must be a non-empty list of {"from", "value"} turns'),
            field="conversations",
            at=where,
        )
        return []
    for index, turn in enumerate(turns):
        if not isinstance(turn.get("from"), str) or turn["from"] not in SHAREGPT_ROLES:
            problems.add(
                tr(
                    "conversations[{index}].from is {speaker!r}; use {speakers}",
                    index=index,
                    speaker=str(turn.get("from"))[:20],
                    speakers=", ".join(SHAREGPT_ROLES),
                ),
                field=f"conversations[{index}].from",
                at=where,
            )
            return []
    messages = [{"role": SHAREGPT_ROLES[t["from"]], "content": t.get("value")} for t in turns]
    first_asked = next((i for i, m in enumerate(messages) if m["role"] == "user"), len(messages))
    for message in messages[:first_asked]:  # a greeting before any question: context only
        if message["role"] == "assistant":  # (ShareGPT has no weight to say so)
            message["weight"] = 0
    return conversation_pairs({"messages": messages, **_tools(record)}, where, problems)


def _prompt_completion(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    prompt, completion = record.get("prompt"), record.get("completion")
    if not isinstance(prompt, list) and not isinstance(completion, list):
        question = text_field("prompt", prompt, where, problems)
        answer = text_field("completion", completion, where, problems)
        return [] if question is None or answer is None else [QAPair(question, answer)]
    if not _messages(prompt, "prompt", where, problems) or not _answers(
        completion, "completion", where, problems
    ):
        return []
    context = [{**m, "weight": 0} if m.get("role") == "assistant" else m for m in prompt]
    return conversation_pairs(
        {"messages": [*context, *completion], **_tools(record)}, where, problems
    )


def _preference(record: dict[str, Any], where: Where, problems: Problems) -> list[QAPair]:
    prompt, chosen, rejected = (record.get(name) for name in ("prompt", "chosen", "rejected"))
    if isinstance(prompt, str) or (prompt is None and isinstance(chosen, str)):
        return _text_preference(prompt, chosen, rejected, where, problems)
    if prompt is None:  # implicit: both conversations, the same up to their last answer
        if not _messages(chosen, "chosen", where, problems) or not _messages(
            rejected, "rejected", where, problems
        ):
            return []
        if chosen[:-1] != rejected[:-1]:
            problems.add(
                tr(
                    '"chosen" and "rejected" without a "prompt" must be the same conversation '
                    "up to their last message, the two answers compared"
                ),
                field="rejected",
                at=where,
            )
            return []
        prompt, chosen, rejected = chosen[:-1], chosen[-1:], rejected[-1:]
    elif not _messages(prompt, "prompt", where, problems) or not all(
        _answers(value, name, where, problems)
        for name, value in (("chosen", chosen), ("rejected", rejected))
    ):
        return []
    return preference_pair(
        {
            "input": {"messages": prompt, **_tools(record)},
            "preferred_output": chosen,
            "non_preferred_output": rejected,
        },
        where,
        problems,
    )


def _text_preference(
    prompt: Any, chosen: Any, rejected: Any, where: Where, problems: Problems
) -> list[QAPair]:
    found = [
        text_field(name, value, where, problems)
        for name, value in (("prompt", prompt), ("chosen", chosen), ("rejected", rejected))
    ]
    question, preferred, other = found
    if question is None or preferred is None or other is None:
        return []
    if not answers_differ(preferred, other, "rejected", where, problems):
        return []
    return [QAPair(question, preferred, rejected=other)]


def _messages(value: Any, name: str, where: Where, problems: Problems) -> TypeGuard[Messages]:
    """A non-empty list of message objects (what is in each, conversations.py checks)."""
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        return True
    problems.add(
        tr(
            '"{name}" must be a non-empty list of {{"role", "content"}} messages, as a '
            "conversational record's parts are",
            name=name,
        ),
        field=name,
        at=where,
    )
    return False


def _answers(value: Any, name: str, where: Where, problems: Problems) -> TypeGuard[Messages]:
    """A conversational completion, chosen or rejected: the assistant's messages."""
    if not _messages(value, name, where, problems):
        return False
    if all(m.get("role") == "assistant" for m in value):
        return True
    problems.add(
        tr('"{name}" holds the assistant\'s messages only: the rest is the prompt', name=name),
        field=name,
        at=where,
    )
    return False


def _tools(record: dict[str, Any]) -> dict[str, Any]:
    return {name: record[name] for name in TOOL_FIELDS if name in record}
