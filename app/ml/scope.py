"""An adapter's scope: the questions it was trained for, told apart from all others.

An adapter trained on a few dozen pairs changes how the model answers every question, not
only those: on SmolLM2-135M a FAQ learned word for word cost a third of the general
questions the base answered right, and replaying the base's own answers beside the FAQ
did not win them back (docs/benchmarks.md, "Teach without breaking"). So a trained adapter
comes with its scope, and serving answers a question outside it with the base model.

The scope is a linear classifier over the base model's last hidden state (the adapter
switched off), averaged over the question's own tokens (the question alone, no chat
template), each dimension standardised by general questions' statistics. The base's own
features, because the tuned model's lean every question towards what it was trained on:
fitted on those, 7 of 28 general questions the base knew were answered wrong, as inside
a staff FAQ's scope. It is fitted when training ends: inside, the job's questions and
copies of them with words dropped (so that a reworded question still falls inside);
outside, qatune's general prompts and small talk (general_prompts.REPLAY and SMALL_TALK:
fitted on sentences alone, "hi", "thanks" and "ok" fell inside and got a FAQ answer).
Asking costs one extra forward pass over the question's tokens, none over the answer.

Serving by vLLM, and the merged and GGUF exports, carry the adapter without its scope:
there the adapter answers every question (their cards say what that keeps). The adapter's
own folder has the scope's file, and its card the lines that apply it with peft
(model_card.py `scoped_snippet`).
"""

import contextlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from app.ml.general_prompts import REPLAY, SMALL_TALK
from app.ml.models import evaluating
from app.ml.serving.asking import question_ids
from app.ml.training.adapter_metadata import SCOPE_FILE

WORD_DROP = 0.3  # of a question's words, dropped in each copy fitted inside the scope
COPIES = 3  # word-dropped copies of each question
PENALTY = 1e-2  # L2 on the weights: many dimensions, few questions
STEPS = 200  # L-BFGS iterations: the fit is convex and small


@dataclass(frozen=True)
class Scope:
    mean: torch.Tensor  # (hidden,) of general questions' features
    scale: torch.Tensor  # (hidden,) their standard deviation
    weight: torch.Tensor  # (hidden,)
    bias: float

    def inside(self, features: torch.Tensor) -> list[bool]:
        """Whether each question (a row of features) is one the adapter was trained for."""
        scores = self._standardised(features) @ self.weight + self.bias
        return (scores > 0).tolist()

    def _standardised(self, features: torch.Tensor) -> torch.Tensor:
        return (features.float().cpu() - self.mean) / self.scale

    def save(self, directory: Path) -> None:
        from safetensors.torch import save_file

        tensors = {
            "mean": self.mean,
            "scale": self.scale,
            "weight": self.weight,
            "bias": torch.tensor([self.bias]),
        }
        save_file({k: v.contiguous() for k, v in tensors.items()}, directory / SCOPE_FILE)


def load_scope(directory: Path) -> Scope | None:
    """The adapter's scope, if it has one (an adapter trained without one answers all)."""
    from safetensors.torch import load_file

    path = directory / SCOPE_FILE
    if not path.is_file():
        return None
    tensors = load_file(path)
    return Scope(tensors["mean"], tensors["scale"], tensors["weight"], float(tensors["bias"]))


def features(model: Any, questions: list[list[int]], device: str) -> torch.Tensor:
    """(questions, hidden): each question's last hidden state, averaged over its tokens, as
    the model is now (serving puts it in base mode first)."""
    rows = []
    with torch.no_grad():
        for ids in questions:
            out = model(
                input_ids=torch.tensor([ids or [0]], device=device),
                output_hidden_states=True,
                logits_to_keep=1,
            )
            rows.append(out.hidden_states[-1][0].float().mean(0).cpu())
    return torch.stack(rows)


def base_features(model: Any, questions: list[list[int]], device: str) -> torch.Tensor:
    """`features` of the base under a PEFT model's adapters, which are switched off."""
    switched_off = getattr(model, "disable_adapter", None)
    with switched_off() if switched_off is not None else contextlib.nullcontext():
        return features(model, questions, device)


def with_words_dropped(question: str, rng: random.Random, share: float = WORD_DROP) -> str:
    words = question.split()
    kept = [word for word in words if rng.random() >= share] or words
    return " ".join(kept)


def fit(inside: torch.Tensor, outside: torch.Tensor) -> Scope:
    """Logistic regression, each side weighted as much as the other."""
    mean = outside.mean(0)
    scale = outside.std(0) + 1e-3
    x = torch.cat([inside, outside]).float()
    x = (x - mean) / scale
    y = torch.cat([torch.ones(len(inside)), torch.zeros(len(outside))])
    balance = torch.where(y > 0, len(outside) / len(inside), 1.0)
    weight = torch.zeros(x.shape[1], requires_grad=True)
    bias = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=STEPS)

    def loss() -> torch.Tensor:
        optimizer.zero_grad()
        value = (
            torch.nn.functional.binary_cross_entropy_with_logits(
                x @ weight + bias, y, weight=balance
            )
            + PENALTY * (weight * weight).sum()
        )
        value.backward()
        return value

    with torch.enable_grad():
        optimizer.step(loss)
    return Scope(mean, scale, weight.detach(), float(bias.detach()))


def outside_of(questions: list[str]) -> list[str]:
    """What a scope is fitted to keep outside: qatune's general prompts and small talk, but
    those the job trains itself (a FAQ may answer "hello"), case and end marks aside."""
    trained = {_plain(q) for q in questions}
    return [p for p in (*REPLAY, *SMALL_TALK) if _plain(p) not in trained]


def _plain(text: str) -> str:
    return text.strip().rstrip("?!.").strip().casefold()


def fit_scope(model: Any, tokenizer: Any, questions: list[str], *, device: str, seed: int) -> Scope:
    """The scope of a tuned model: its questions (and word-dropped copies) against
    general ones and small talk."""
    rng = random.Random(seed)
    inside_text = list(dict.fromkeys(questions))
    inside_text += [with_words_dropped(q, rng) for q in inside_text for _ in range(COPIES)]
    general = outside_of(questions)
    with evaluating(model):
        inside = base_features(model, [question_ids(tokenizer, q) for q in inside_text], device)
        outside = base_features(model, [question_ids(tokenizer, q) for q in general], device)
    return fit(inside, outside)
