"""QueryService: the serving engines, one per base model, and a blocking `answer` for
callers that want the whole text (the native query route, `qatune ask`).

Each base model is loaded once on the service's device, in the precision training uses
here, and served by its own `Engine` thread; adapters load into that engine on first use.
"""

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.ml.device import DevicePlan
from app.ml.generation import DTYPES
from app.ml.models import load_causal_lm, load_tokenizer, resolve_model_dir
from app.ml.pairs import QAPair
from app.ml.serving.engine import Engine, EngineLimits
from app.ml.serving.requests import (
    AdapterRef,
    EngineEvent,
    EngineStats,
    FinishReason,
    GenerationFailed,
    GenerationRequest,
    Sampling,
    TextDelta,
)
from app.ml.training.adapter_files import answer_budget, read_adapter_metadata


@dataclass(frozen=True)
class Answer:
    answer: str
    base_model: str
    adapter: str | None
    device: str
    seconds: float
    finish_reason: FinishReason = FinishReason.STOP


class QueryService:
    def __init__(
        self,
        *,
        device_plan: DevicePlan,
        model_cache_dir: Path,
        offline: bool,
        configured_models: tuple[str, ...] = (),
        limits: EngineLimits | None = None,
        timeout_seconds: float = 300.0,
    ) -> None:
        """Answers on the device and in the precision that training uses here."""
        self.device = device_plan.device
        self.precision = device_plan.precision
        self.model_cache_dir = model_cache_dir
        self.offline = offline
        self.configured_models = configured_models
        self.limits = limits or EngineLimits()
        self.timeout_seconds = timeout_seconds
        self._engines: dict[str, Engine] = {}
        self._engines_lock = threading.Lock()

    def engine(self, base_model: str) -> Engine:
        """The base model's engine, loading the model the first time (seconds: call it off
        the event loop)."""
        with self._engines_lock:
            engine = self._engines.get(base_model)
            if engine is None or engine.closed:
                model_dir = resolve_model_dir(
                    base_model,
                    cache_dir=self.model_cache_dir,
                    offline=self.offline,
                    configured=self.configured_models,
                )

                def load() -> tuple[Any, Any]:
                    model = load_causal_lm(
                        model_dir, dtype=DTYPES[self.precision], device=self.device
                    )
                    return model.eval(), load_tokenizer(model_dir)

                self._engines[base_model] = Engine(
                    base_model=base_model,
                    load=load,
                    device=self.device,
                    precision=self.precision,
                    limits=self.limits,
                )
            return self._engines[base_model]

    def request(
        self,
        prompt_ids: list[int],
        *,
        adapter: AdapterRef | None,
        sampling: Sampling,
        on_event: Callable[[EngineEvent], None],
    ) -> GenerationRequest:
        return GenerationRequest(
            prompt_ids=prompt_ids,
            adapter=adapter,
            sampling=sampling,
            on_event=on_event,
            deadline=time.monotonic() + self.timeout_seconds,
        )

    def answer(
        self,
        question: str,
        *,
        system: str | None = None,
        adapter_key: str | None,
        adapter_dir: Path | None,
        base_model: str,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
    ) -> Answer:
        """The whole answer, waiting for it (call it off the event loop). Without
        `max_new_tokens`, room for the adapter's own answers (answer_budget)."""
        from app.ml.data import prompt_ids

        started = time.perf_counter()
        metadata = read_adapter_metadata(adapter_dir) if adapter_dir is not None else None
        if system is None and metadata is not None:  # answer as the adapter was trained
            system = metadata.system_prompt
        max_new_tokens = max_new_tokens or answer_budget(metadata)
        engine = self.engine(base_model)
        ids = prompt_ids(engine.tokenizer, QAPair(question, "", system).prompt_messages())
        events: queue.Queue[EngineEvent] = queue.Queue()
        adapter = AdapterRef(adapter_key, adapter_dir) if adapter_key and adapter_dir else None
        sampling = Sampling(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        engine.submit(self.request(ids, adapter=adapter, sampling=sampling, on_event=events.put))
        parts = []
        while True:
            event = events.get()
            if isinstance(event, TextDelta):
                parts.append(event.text)
                continue
            if event.reason in (FinishReason.ERROR, FinishReason.CANCELLED):
                raise GenerationFailed(event.error or event.reason)
            return Answer(
                "".join(parts),
                base_model,
                adapter_key,
                self.device,
                time.perf_counter() - started,
                event.reason,
            )

    def forget_adapter(self, adapter_key: str) -> None:
        """Drop a deleted model's adapter and its checkpoints' from every engine."""
        for engine in list(self._engines.values()):
            engine.forget_adapters(adapter_key)

    def drop_cached(self) -> int:
        """Stop every engine and unload its model (a training job needs the memory)."""
        with self._engines_lock:
            engines = list(self._engines.values())
            self._engines.clear()
        for engine in engines:
            engine.close()
        from app.ml.memory import release_memory

        release_memory(self.device)
        return len(engines)

    def stats(self) -> list[EngineStats]:
        return [engine.stats() for engine in list(self._engines.values())]

    @property
    def loaded(self) -> dict[str, list[str]]:
        return {stats.base_model: stats.adapters for stats in self.stats()}
