"""Answers sampled from the run's own weights, as they are at this step, through the
serving engine: every row of a step decoded together (prompts prefilled together, one
forward a token for all rows), not one `generate` call at a time.

The engine's thread owns the model only while the loop waits for its answers; between
two samplings the loop trains it. The engine runs the model as it is, adapter included
(no adapter of the engine's own: the policy is its "base").
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.ml.serving.asking import Row, ask
from app.ml.serving.engine import Engine
from app.ml.serving.requests import AskFailed, EngineLimits, FinishReason, Sampling
from app.ml.serving.text import answer_text

SAMPLING_SECONDS = 3600.0  # one step's sampling, at most...
STALL_SECONDS = 300.0  # ...and no new token in any row for this long fails the step


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]  # the answer's tokens, the end of turn included when it ended there
    text: str
    ended: bool  # False: cut at max_tokens or the model's context


class SamplingFailed(RuntimeError):
    """The engine could not answer (out of memory, a failed step): the step fails."""


class PolicySampler:
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        device: str,
        precision: str,
        max_rows: int,
        between_steps: Callable[[], None] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.end_of_turn = int(tokenizer.eos_token_id)
        self.engine = Engine(
            base_model="policy",
            load=lambda: (model, tokenizer),
            device=device,
            precision=precision,
            limits=EngineLimits(max_batch=max_rows, max_waiting=1_000_000, max_adapters=1),
            between_steps=between_steps,
        )

    def sample(self, prompts: list[list[int]], sampling: list[Sampling]) -> list[Completion]:
        """One answer per (prompt, sampling), in order; the model must be in eval mode.
        SamplingFailed if the engine fails, or no row gets a token for STALL_SECONDS."""
        if not prompts:
            return []
        rows = [
            Row(prompt, None, how, stream_text=False)
            for prompt, how in zip(prompts, sampling, strict=True)
        ]
        try:
            generation = ask(
                self.engine, rows, seconds=SAMPLING_SECONDS, stall_seconds=STALL_SECONDS
            )
            choices = generation.answer()
        except AskFailed as exc:
            raise SamplingFailed(f"sampling answers failed: {exc}") from exc
        completions = []
        for choice in choices:
            assert choice.finished is not None
            stopped = choice.finished.reason == FinishReason.STOP
            ids = choice.token_ids + ([self.end_of_turn] if stopped else [])
            text = answer_text(self.tokenizer, choice.token_ids)
            completions.append(Completion(ids, text, stopped))
        return completions

    def close(self) -> None:
        self.engine.close()
