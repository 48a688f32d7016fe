"""A job's examples as its base model reads them, checked when the job is created: their
tokens (what the plan is made from), and what cannot be trained said up front with the
items, not found at training time: a template that refuses a record by its own rules, tools
that it cannot write, a conversation longer than the model reads."""

from typing import Any

from app.core.errors import ValidationFailed
from app.core.language import tr
from app.ml.hyperparameters import DataFacts
from app.ml.pairs import QAPair

CHARS_PER_TOKEN = 3  # when no tokenizer is at hand: a cautious average for mixed text


def data_facts_of(base_model: str, pairs: list[QAPair], tokenizer: Any) -> DataFacts:
    if tokenizer is None:
        return DataFacts(
            lengths=tuple(p.text_chars // CHARS_PER_TOKEN + 16 for p in pairs),
            answer_lengths=tuple(len(p.answer) // CHARS_PER_TOKEN + 2 for p in pairs),
            preference=bool(pairs) and all(p.rejected is not None for p in pairs),
        )
    from app.ml.data import Example, data_facts, encode_pair

    encoded: list[Example] = []
    refused: list[tuple[int, str]] = []
    for index, pair in enumerate(pairs):
        try:
            encoded.append(encode_pair(tokenizer, pair))
        except Exception as exc:  # the template's own rule (alternating roles, call ids…)
            refused.append((index, str(exc)[:300]))
    if refused:
        raise ValidationFailed(
            tr(
                "The chat template of {base_model} refuses {count} examples (its own rules, "
                "such as roles that alternate or the form of tool call ids): change those "
                "conversations, or train on another base",
                base_model=base_model,
                count=len(refused),
            ),
            details=[
                {"item": index + 1, "field": "messages", "message": problem}
                for index, problem in refused[:20]
            ],
        )
    return data_facts(encoded)


def check_context(base_model: str, pairs: list[QAPair], data: DataFacts, context: int) -> None:
    """A conversation longer than the model reads cannot be learned whole: said up front,
    not cut at training time."""
    over = [(i, n) for i, n in enumerate(data.lengths) if n > context]
    if over:
        raise ValidationFailed(
            tr(
                "Examples longer than {base_model} reads ({context} tokens): {count}; shorten "
                "those conversations or split them into several records",
                count=len(over),
                base_model=base_model,
                context=context,
            ),
            details=[
                {
                    "item": index + 1,
                    "field": "messages",
                    "message": tr(
                        "{tokens} tokens with the answer to {question!r}",
                        tokens=tokens,
                        question=pairs[index].question[:60],
                    ),
                }
                for index, tokens in over[:20]
            ],
        )


def check_tools(base_model: str, pairs: list[QAPair], tokenizer: Any) -> None:
    """Tool definitions, calls and results are trained through the base's chat template:
    one that writes none of them would drop them in silence, so the job is refused."""
    from app.ml.chat_template import renders_tools

    using = [i for i, pair in enumerate(pairs) if pair.uses_tools]
    if not using or renders_tools(tokenizer):
        return
    raise ValidationFailed(
        tr(
            "{count} examples use tools (tools, tool_calls or tool results), and the chat "
            "template of {base_model} writes no tools: train them on a base whose template "
            "does (Qwen2.5, Llama 3.1 and Mistral instruct models do), or remove them",
            count=len(using),
            base_model=base_model,
        ),
        details=[
            {
                "item": index + 1,
                "field": "messages",
                "message": tr(
                    "uses tools, in the answer to {question!r}", question=pairs[index].question[:60]
                ),
            }
            for index in using[:20]
        ],
    )
