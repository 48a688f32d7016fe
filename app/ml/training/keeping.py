"""Keeping what the model knew: its answers before training, replayed and measured.

Before the first step the model answers qatune's general prompts (general_prompts.py) as
it is (the base, or the model a job trains further), greedily, through the serving engine:

- the probes it answers right are what it knew; the forgetting meter asks them again,
  cheaply at each epoch (teacher-forced: the share of its own earlier answers' tokens it
  still predicts) and for real after training (greedy answers, checked for their facts):
  "kept N of the M general questions it knew";
- its answers to the replay prompts become training examples beside the job's own (the
  model's own words as targets), so that the adapter learns the FAQ without overwriting
  how the model answers everything else.

A model that answers none of the probes (builtin:tiny, whose weights are random) knew
nothing to keep: no replay, and the meter says so instead of a percentage.
"""

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from app.core.storage import write_atomic
from app.ml.data import Example, encode_pair
from app.ml.general_prompts import PROBES, REPLAY, Probe
from app.ml.models import evaluating
from app.ml.pairs import QAPair
from app.ml.scope import Scope, base_features
from app.ml.serving.asking import Row, ask, chat_ids, question_ids
from app.ml.serving.engine import Engine
from app.ml.serving.requests import EngineLimits, FinishReason, Sampling
from app.ml.training.base_answers import fingerprint

PROBE_TOKENS = 64  # a general question's answer: its fact comes early
REPLAY_TOKENS = 128
ASK_SECONDS = 1800.0


@dataclass(frozen=True)
class KnownAnswer:
    probe: Probe
    answer: str  # the model's own answer before training, which held the fact


@dataclass(frozen=True)
class Knowledge:
    """What the model answered before training."""

    known: list[KnownAnswer]  # the probes it answered right
    asked: int  # the probes asked
    # The replay prompts with its own answers; None: not asked (the job replays none)
    replay: list[QAPair] | None

    @property
    def any(self) -> bool:
        return bool(self.known)


def holds(answer: str, facts: Sequence[str]) -> bool:
    """One of the facts' spellings is in the answer (case aside; a number only whole)."""
    for fact in facts:
        pattern = re.escape(fact.lower())
        if fact[:1].isalnum():
            pattern = r"(?<![0-9a-z])" + pattern
        if fact[-1:].isdigit():  # a word may go on (kitten: kittens), a number not (7: 17)
            pattern += r"(?![0-9])"
        if re.search(pattern, answer.lower()):
            return True
    return False


def answers_of(
    model: Any, tokenizer: Any, prompts: list[str], max_tokens: int, *, device: str, precision: str
) -> list[tuple[str, bool]]:
    """The model's greedy answers as it is now, and whether each ended (not cut)."""
    engine = Engine(
        base_model="model",
        load=lambda: (model, tokenizer),
        device=device,
        precision=precision,
        limits=EngineLimits(max_batch=32, max_waiting=len(prompts) + 1, max_adapters=1),
    )
    try:
        rows = [
            Row(chat_ids(tokenizer, [{"role": "user", "content": p}]), None,
                Sampling(max_tokens=max_tokens))
            for p in prompts
        ]  # fmt: skip
        choices = ask(engine, rows, seconds=ASK_SECONDS).answer()
    finally:
        engine.close()
    return [
        (c.answer.strip(), c.finished is not None and c.finished.reason == FinishReason.STOP)
        for c in choices
    ]


def what_it_knows(
    model: Any, tokenizer: Any, *, device: str, precision: str, with_replay: bool
) -> Knowledge:
    """`with_replay`: ask the replay prompts too (60 answers of up to 128 tokens, most of
    the asking's time), for a job that trains on them."""
    with evaluating(model):
        probes = answers_of(model, tokenizer, [p.question for p in PROBES], PROBE_TOKENS,
                            device=device, precision=precision)  # fmt: skip
        known = [
            KnownAnswer(probe, answer)
            for probe, (answer, _) in zip(PROBES, probes, strict=True)
            if holds(answer, probe.facts)
        ]
        replay: list[QAPair] | None = [] if with_replay else None
        if known and replay is not None:  # a model that knows nothing has none of its own
            said = answers_of(model, tokenizer, list(REPLAY), REPLAY_TOKENS,
                              device=device, precision=precision)  # fmt: skip
            replay = [
                QAPair(prompt, answer)
                for prompt, (answer, ended) in zip(REPLAY, said, strict=True)
                if answer and ended  # a cut answer would teach the model to stop mid-word
            ]
    return Knowledge(known, len(PROBES), replay)


def knowledge_file(directory: Path, model_dir: Path, *, device: str, answering_as: str) -> Path:
    """Where a base model's answers before training are kept for its next jobs. A new
    adapter starts as the base itself (its B is zero), so every job on that base, device
    and precision gets the same answers: the first job asks them, the next ones read them
    (25 s of SmolLM2-135M on two CPU cores for the probes, 80 s with the replay prompts).
    Named by the base's fingerprint and by the prompts, so new prompts or budgets are
    asked again."""
    prompts = [[p.question, list(p.facts)] for p in PROBES], list(REPLAY)
    asked = json.dumps([prompts, PROBE_TOKENS, REPLAY_TOKENS], ensure_ascii=False)
    digest = hashlib.sha256(asked.encode()).hexdigest()[:12]
    return directory / f"knowledge-{fingerprint(model_dir, device, answering_as)}-{digest}.json"


def read_knowledge(path: Path) -> Knowledge | None:
    """What an earlier job on the same base found, or None (not there, or not readable)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        probes = {probe.question: probe for probe in PROBES}
        known = [KnownAnswer(probes[q], str(a)) for q, a in raw["known"]]
        said = raw["replay"]
        replay = None if said is None else [QAPair(str(p), str(a)) for p, a in said]
        return Knowledge(known, int(raw["asked"]), replay)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:  # asked again, not trusted
        logger.warning("Ignoring the base's kept answers in {}: {}", path, exc)
        return None


def write_knowledge(path: Path, knowledge: Knowledge) -> None:
    content = {
        "known": [[k.probe.question, k.answer] for k in knowledge.known],
        "asked": knowledge.asked,
        "replay": None
        if knowledge.replay is None
        else [[pair.question, pair.answer] for pair in knowledge.replay],
    }
    try:
        write_atomic(path, json.dumps(content, ensure_ascii=False).encode())
    except OSError as exc:  # a full disk costs the next job the asking, no more
        logger.warning("Could not keep the base's answers in {}: {}", path, exc)


def replay_examples(tokenizer: Any, knowledge: Knowledge, max_seq_length: int) -> list[Example]:
    return [
        example
        for example in (encode_pair(tokenizer, pair) for pair in knowledge.replay or [])
        if example.num_tokens <= max_seq_length
    ]


def meter_examples(tokenizer: Any, knowledge: Knowledge) -> list[Example]:
    """The known probes with the model's own answers: what the meter scores each epoch."""
    return [encode_pair(tokenizer, QAPair(k.probe.question, k.answer)) for k in knowledge.known]


@dataclass(frozen=True)
class Kept:
    """How much of what the model knew it still knows, after training."""

    known: int  # the probes it answered right before training
    kept: int  # of those, the ones it still answers right, as served
    alone: int  # of those, the ones the adapter answers right when it answers all
    outside: int = 0  # of those, the ones outside the adapter's scope: the base answers

    @property
    def share(self) -> float:
        return self.kept / self.known if self.known else 1.0


def kept_after(
    model: Any,
    tokenizer: Any,
    knowledge: Knowledge,
    *,
    device: str,
    precision: str,
    scope: Scope | None = None,
) -> Kept | None:
    """The known probes asked again, greedily (None: the model knew nothing to keep). A
    probe outside the adapter's scope is answered by the base, which answered it right."""
    if not knowledge.any:
        return None
    with evaluating(model):
        questions = [k.probe.question for k in knowledge.known]
        said = answers_of(model, tokenizer, questions, PROBE_TOKENS,
                          device=device, precision=precision)  # fmt: skip
        inside = (
            scope.inside(
                base_features(model, [question_ids(tokenizer, q) for q in questions], device)
            )
            if scope is not None
            else [True] * len(questions)
        )
    right = [
        holds(answer, k.probe.facts) for k, (answer, _) in zip(knowledge.known, said, strict=True)
    ]
    return Kept(
        known=len(knowledge.known),
        kept=sum(r or not i for r, i in zip(right, inside, strict=True)),
        alone=sum(right),
        outside=inside.count(False),
    )
