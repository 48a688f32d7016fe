"""QA pairs → token ids → packed micro-batches with answer-only targets.

Two ways to pack the examples of an optimizer step, both exact (the loss of every example
is the same as if it ran alone; tests/ml/test_packing.py checks this):

- flat (`collate_flat`): all real tokens in one row, positions restarting at 0 for each
  example, and `qatune_seq_lens` telling the varlen attention (varlen_attention.py) where
  each example starts. No padding at all. The tokens every example of the row starts with
  (the chat template's opening, a system prompt) are there once: each example attends to
  that shared prefix and then to itself. The prefix's states depend on nothing after it,
  so this is the same computation with the copies left out; the gradients that reach the
  prefix from every example add up in its one copy.
- rows (`collate_rows`): examples laid end to end in rows of bounded length (first fit,
  longest first), each attending only to itself through a 4D block-diagonal mask. For
  models whose attention does not go through transformers' registry.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from app.ml.chat_template import renders_tools
from app.ml.fused import IGNORE
from app.ml.hyperparameters import DataFacts, ResolvedHyperparameters, validation_size
from app.ml.pairs import QAPair
from app.ml.shapes import ModelShape


@dataclass(frozen=True)
class Example:
    input_ids: list[int]
    prompt_len: int  # tokens before the answer; only answer tokens are trained on
    # Preference pairs (DPO): the same prompt with the non-preferred answer, and the
    # starting model's summed answer log-probabilities of both (set before training).
    rejected: "Example | None" = None
    reference: tuple[float, float] | None = None
    # Reinforcement: what the grader reads as `item` (QAPair.grader_item)
    item: dict[str, Any] | None = field(default=None, compare=False)
    # Where the user's question is in the prompt's tokens [start, end): what question
    # noise drops tokens of; None: unknown (the template rewrote the turn)
    question: tuple[int, int] | None = field(default=None, compare=False)
    # The model's own answer to a general prompt (keeping.py): trained beside the job's
    # examples, never counted among the answers to learn
    replay: bool = field(default=False, compare=False)
    # A job's example trained again beside a step's own, as written, because the weights
    # gave it another's answer (judging.py `drill`): its scheduled copy alone is counted
    drilled: bool = field(default=False, compare=False)
    # A noisy copy of a job's example: the one it stands for in the learned count
    origin: "Example | None" = field(default=None, compare=False, repr=False)

    @property
    def num_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def answer_tokens(self) -> int:
        return len(self.input_ids) - self.prompt_len


@dataclass
class Batch:
    input_ids: torch.Tensor  # [rows, length]
    position_ids: torch.Tensor  # [rows, length]
    attention_mask: torch.Tensor | None  # [rows, 1, length, length], True = may attend
    target_index: torch.Tensor  # flat positions (row * length + t) whose next token is trained
    targets: torch.Tensor  # the token each of those positions must predict
    real_tokens: int  # the examples' own tokens
    computed_tokens: int  # the tokens the model runs on: padding in, a shared prefix once
    seq_lens: list[int] | None = None  # flat batches: each example's length after the prefix
    shared_prefix: int = 0  # flat batches: leading tokens all examples share, stored once
    answer_tokens: int = 0  # targets that count (flat batches pad theirs with IGNORE)
    examples: tuple[Example, ...] = ()  # whose targets these are, in order

    def answered(self, hits: torch.Tensor) -> list[tuple[Example, bool]]:
        """Each example, and whether its every answer token was the most likely one: then
        greedy decoding gives its answer exactly (each step's input is the right token)."""
        return [(e, right) for e, right, _ in self.answered_tokens(hits)]

    def answered_tokens(self, hits: torch.Tensor) -> list[tuple[Example, bool, int]]:
        """`answered`, with how many of each example's answer tokens were right."""
        counts = [e.answer_tokens for e in self.examples]
        per_example = hits[: self.answer_tokens].split(counts)
        return [
            (e, bool(h.all()), int(h.sum()))
            for e, h in zip(self.examples, per_example, strict=True)
        ]

    def to(self, device: str) -> "Batch":
        return replace(
            self,
            input_ids=self.input_ids.to(device),
            position_ids=self.position_ids.to(device),
            attention_mask=None if self.attention_mask is None else self.attention_mask.to(device),
            target_index=self.target_index.to(device),
            targets=self.targets.to(device),
        )


def data_facts(examples: Sequence[Example]) -> DataFacts:
    """Token counts; a preference pair's both answers (DPO runs them in one forward)."""
    preference = bool(examples) and all(e.rejected is not None for e in examples)
    return DataFacts(
        lengths=tuple(
            e.num_tokens + (e.rejected.num_tokens if e.rejected else 0) for e in examples
        ),  # fmt: skip
        answer_lengths=tuple(e.answer_tokens for e in examples),
        preference=preference,
        shared_prefix=0 if preference else shared_prefix_len(examples),
    )


def prompt_ids(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> list[int]:
    """The conversation rendered by the model's chat template, up to the assistant's turn."""
    text = tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=True
    )
    return list(tokenizer(text, add_special_tokens=False).input_ids)


def encode_pair(tokenizer: Any, pair: QAPair) -> Example:
    """The chat template's own rendering of the turn; the answer is what the template adds."""
    tools = pair.tool_definitions()
    prompt = prompt_ids(tokenizer, pair.prompt_messages(), tools)
    full_text = tokenizer.apply_chat_template(pair.messages(), tools=tools, tokenize=False)
    full = list(tokenizer(full_text, add_special_tokens=False).input_ids)
    if full[: len(prompt)] != prompt:
        if pair.answer_tool_calls:
            raise ValueError(
                "the chat template writes the conversation before a tool call differently "
                "once the call is added: its calls cannot be trained as answers"
            )
        # Templates that rewrite earlier turns: fall back to prompt + answer + end of turn.
        answer_ids = tokenizer(pair.answer, add_special_tokens=False).input_ids
        full = prompt + list(answer_ids) + [tokenizer.eos_token_id]
    rejected = encode_pair(tokenizer, pair.rejected_pair()) if pair.rejected else None
    span = _question_span(tokenizer, pair, prompt, tools)
    return Example(full, len(prompt), rejected, item=pair.grader_item, question=span)


def _question_span(
    tokenizer: Any, pair: QAPair, prompt: list[int], tools: Any
) -> tuple[int, int] | None:
    """The tokens of the user's question in the prompt: what differs from the same prompt
    with an empty question (the template's words around it are the same)."""
    if not pair.question.strip():
        return None
    bare = prompt_ids(tokenizer, replace(pair, question="").prompt_messages(), tools)
    start = 0
    while start < min(len(bare), len(prompt)) and bare[start] == prompt[start]:
        start += 1
    end = 0
    while end < min(len(bare), len(prompt)) - start and bare[-1 - end] == prompt[-1 - end]:
        end += 1
    return (start, len(prompt) - end) if len(prompt) - end > start else None


def encode_pairs(
    tokenizer: Any, pairs: Sequence[QAPair], max_seq_length: int
) -> tuple[list[Example], int]:
    """Encode every pair; cut answers that overflow max_seq_length. Returns (examples, cut)."""
    refuse_untemplated_tools(tokenizer, pairs)
    return fit_to_length([encode_pair(tokenizer, pair) for pair in pairs], max_seq_length)


def refuse_untemplated_tools(tokenizer: Any, pairs: Sequence[QAPair]) -> None:
    """A ValueError if pairs call tools and the chat template cannot write them (job creation
    says so first, with the items; this stops a job whose base was not here then)."""
    using = [i + 1 for i, pair in enumerate(pairs) if pair.uses_tools]
    if using and not renders_tools(tokenizer):
        raise ValueError(
            f"{len(using)} examples use tools (items {using[:10]}), and the model's chat "
            "template writes no tools: train them on a base whose template does"
        )


def fit_to_length(examples: Sequence[Example], max_seq_length: int) -> tuple[list[Example], int]:
    """Cut examples to max_seq_length; drop those with no answer token left. (kept, cut)."""
    kept, cut = [], 0
    for example in examples:
        rejected = example.rejected
        if rejected is not None and rejected.num_tokens > max_seq_length:
            example = replace(example, rejected=_cut(rejected, max_seq_length))
        if example.num_tokens > max_seq_length:
            cut += 1
            if example.prompt_len >= max_seq_length - 1:
                continue  # not even one answer token fits
            example = _cut(example, max_seq_length)
        kept.append(example)
    return kept, cut


def _cut(example: Example, max_seq_length: int) -> Example:
    return replace(example, input_ids=example.input_ids[:max_seq_length])


def validation_indices(num_pairs: int, fraction: float, seed: int) -> set[int]:
    """Which pairs a run holds out for evaluation: a seeded random choice."""
    order = list(range(num_pairs))
    random.Random(seed).shuffle(order)
    return set(order[: validation_size(num_pairs, fraction)])


def split_examples(
    tokenizer: Any,
    pairs: list[QAPair],
    encoded: list[Example],
    validation_pairs: list[QAPair],
    params: ResolvedHyperparameters,
    shape: ModelShape,
) -> tuple[list[QAPair], list[QAPair], list[Example], list[Example], int]:
    """(training pairs, validation pairs, their examples fitted to max_seq_length, how many
    training examples were cut): the validation file's pairs, or the split's held out."""
    held_out = validation_indices(len(pairs), params.validation_split, params.seed)
    val_pairs = validation_pairs or [pair for i, pair in enumerate(pairs) if i in held_out]
    train_pairs = [pair for i, pair in enumerate(pairs) if i not in held_out]
    examples, cut = fit_to_length(
        [e for i, e in enumerate(encoded) if i not in held_out], params.max_seq_length
    )
    val_encoded = (
        encode_pairs(tokenizer, val_pairs, shape.max_positions)[0]
        if validation_pairs
        else [e for i, e in enumerate(encoded) if i in held_out]
    )
    validation, _ = fit_to_length(val_encoded, params.max_seq_length)
    return train_pairs, val_pairs, examples, validation, cut


def pack_rows(examples: Sequence[Example], row_tokens: int) -> list[list[Example]]:
    """First-fit decreasing: few rows, little padding. A longer example gets a row of its own."""
    rows: list[list[Example]] = []
    room: list[int] = []
    for example in sorted(examples, key=lambda e: e.num_tokens, reverse=True):
        for i, free in enumerate(room):
            if example.num_tokens <= free:
                rows[i].append(example)
                room[i] -= example.num_tokens
                break
        else:
            rows.append([example])
            room.append(max(row_tokens, example.num_tokens) - example.num_tokens)
    return rows


def collate_rows(rows: Sequence[Sequence[Example]], pad_id: int) -> Batch:
    length = max(sum(e.num_tokens for e in row) for row in rows)
    n = len(rows)
    input_ids = torch.full((n, length), pad_id, dtype=torch.long)
    position_ids = torch.zeros((n, length), dtype=torch.long)
    segment = torch.full((n, length), -1, dtype=torch.long)  # padding: its own segment
    target_index: list[int] = []
    targets: list[int] = []
    real = 0
    for r, row in enumerate(rows):
        start = 0
        for s, example in enumerate(row):
            end = start + example.num_tokens
            input_ids[r, start:end] = torch.tensor(example.input_ids)
            position_ids[r, start:end] = torch.arange(example.num_tokens)
            segment[r, start:end] = s
            # Position t predicts token t+1: answer tokens are predicted from prompt_len-1 on.
            for t in range(example.prompt_len - 1, example.num_tokens - 1):
                target_index.append(r * length + start + t)
                targets.append(example.input_ids[t + 1])
            real += example.num_tokens
            start = end
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    mask = (segment[:, :, None] == segment[:, None, :]) & causal
    return Batch(
        input_ids=input_ids,
        position_ids=position_ids,
        attention_mask=mask[:, None, :, :],
        target_index=torch.tensor(target_index, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        real_tokens=real,
        computed_tokens=n * length,
        answer_tokens=len(targets),
        examples=tuple(e for row in rows for e in row),
    )


def shared_prefix_len(examples: Sequence[Example]) -> int:
    """How many leading tokens all the examples share, short of the last prompt token.

    The last prompt token predicts the first answer token, so it stays with its example.
    """
    if len(examples) < 2:
        return 0
    first = examples[0].input_ids
    limit = min(e.prompt_len for e in examples) - 1
    shared = 0
    while shared < limit and all(e.input_ids[shared] == first[shared] for e in examples):
        shared += 1
    return shared


def bucket_length(tokens: int) -> int:
    """`tokens` rounded up to one of 8 lengths per doubling (at most 1/8 more; 16 at least).

    Each new length of a row costs oneDNN new kernels for every bf16 matmul (kept in its
    caches: ~10 MB a length on the built-in model, 900 MB over a job of 92 steps of
    lengths that never repeat); bucketed, a job meets a few dozen lengths at most.
    """
    step = max(16, (1 << max(0, tokens.bit_length() - 1)) // 8)
    return -(-tokens // step) * step


def collate_flat(examples: Sequence[Example], pad_id: int = 0) -> Batch:
    """All examples in one row of real tokens, their shared prefix once; attention is told
    how long the prefix is and where each example starts. The row is padded to a bucket
    length: the padding is the last example's tail, which no real token sees (attention is
    causal) and which is never a target, so it changes neither loss nor gradients."""
    shared = shared_prefix_len(examples)
    ids = examples[0].input_ids[:shared]
    positions = list(range(shared))
    target_index: list[int] = []
    targets: list[int] = []
    for example in examples:
        start = len(ids) - shared  # where the example would begin, prefix included
        ids.extend(example.input_ids[shared:])
        positions.extend(range(shared, example.num_tokens))
        target_index.extend(range(start + example.prompt_len - 1, start + example.num_tokens - 1))
        targets.extend(example.input_ids[example.prompt_len :])
    seq_lens = [e.num_tokens - shared for e in examples]
    padding = bucket_length(len(ids)) - len(ids)
    ids.extend([pad_id] * padding)
    positions.extend([0] * padding)
    seq_lens[-1] += padding
    # The LM head's rows too: one more shape a step otherwise. Padded rows predict IGNORE.
    answer_tokens = len(targets)
    target_padding = bucket_length(answer_tokens) - answer_tokens
    target_index.extend([0] * target_padding)
    targets.extend([IGNORE] * target_padding)
    return Batch(
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([positions], dtype=torch.long),
        attention_mask=None,
        target_index=torch.tensor(target_index, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        real_tokens=sum(e.num_tokens for e in examples),
        computed_tokens=len(ids),
        seq_lens=seq_lens,
        shared_prefix=shared,
        answer_tokens=answer_tokens,
        examples=tuple(examples),
    )


def micro_batches(
    examples: Sequence[Example],
    *,
    row_tokens: int,
    micro_batch_tokens: int,
    pad_id: int,
    flat: bool = False,
) -> list[Batch]:
    """Split one optimizer step's examples into packed micro-batches of bounded size."""
    if flat:
        batches: list[Batch] = []
        group: list[Example] = []
        tokens = 0
        for example in examples:
            if group and tokens + example.num_tokens > micro_batch_tokens:
                batches.append(collate_flat(group, pad_id))
                group, tokens = [], 0
            group.append(example)
            tokens += example.num_tokens
        if group:
            batches.append(collate_flat(group, pad_id))
        return batches
    rows = pack_rows(examples, row_tokens)
    batches = []
    row_group: list[list[Example]] = []
    for row in rows:
        widest = max([sum(e.num_tokens for e in r) for r in row_group + [row]])
        if row_group and widest * (len(row_group) + 1) > micro_batch_tokens:
            batches.append(collate_rows(row_group, pad_id))
            row_group = []
        row_group.append(row)
    if row_group:
        batches.append(collate_rows(row_group, pad_id))
    return batches
