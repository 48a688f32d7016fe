"""Answers sampled from the run's own weights, as they are at this step, through the
serving engine: every row of a step decoded together (prompts prefilled together, one
forward a token for all rows), not one `generate` call at a time.

The engine's thread owns the model only while the loop waits for its answers; between
two samplings the loop trains it. The engine runs the model as it is, adapter included
(no adapter of the engine's own: the policy is its "base").
"""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.ml.serving.engine import Engine
from app.ml.serving.requests import (
    EngineEvent,
    EngineLimits,
    Finished,
    FinishReason,
    GenerationRequest,
    Sampling,
)
from app.ml.serving.text import answer_text

SAMPLING_SECONDS = 3600.0  # one step's sampling, at most


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
        """One answer per (prompt, sampling), in order; the model must be in eval mode."""
        ended: list[Finished | None] = [None] * len(prompts)
        requests: list[GenerationRequest] = []
        all_done = threading.Event()
        left = [len(prompts)]
        lock = threading.Lock()

        def on_event(index: int) -> Callable[[EngineEvent], None]:
            def take(event: EngineEvent) -> None:
                if isinstance(event, Finished):
                    ended[index] = event
                    with lock:
                        left[0] -= 1
                        if left[0] == 0:
                            all_done.set()

            return take

        deadline = time.monotonic() + SAMPLING_SECONDS
        for i, (prompt, how) in enumerate(zip(prompts, sampling, strict=True)):
            request = GenerationRequest(prompt, None, how, on_event(i), deadline, stream_text=False)
            requests.append(request)
            self.engine.submit(request)
        if prompts:
            all_done.wait()
        completions = []
        for request, finished in zip(requests, ended, strict=True):
            assert finished is not None
            if finished.reason == FinishReason.ERROR:
                raise SamplingFailed(f"sampling answers failed: {finished.error}")
            stopped = finished.reason == FinishReason.STOP
            ids = list(request.generated) + ([self.end_of_turn] if stopped else [])
            text = answer_text(self.tokenizer, request.generated)
            completions.append(Completion(ids, text, stopped))
        return completions

    def close(self) -> None:
        self.engine.close()
