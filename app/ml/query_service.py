"""QueryService: the serving engines, one per base model, on the device training uses.

Each base model is loaded once on the service's device, in the precision training uses
here, and served by its own `Engine` thread; adapters load into that engine on first use.
An adapter trained on a quantized base is served on the base quantized the same way (an
engine of its own): on the base as stored, one trained on the built-in model's 4-bit base
answered 2 of 30 questions it had learned (docs/benchmarks.md).
Nothing here imports torch until the first engine is made: the API starts without it.
What a request asks and how its answer comes back is the serving service's business
(app/services/serving/queries.py).
"""

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from app.ml.device import DevicePlan
from app.ml.models import resolve_model_dir
from app.ml.quantization import Quantization
from app.ml.serving.requests import EngineLimits, EngineStats

if TYPE_CHECKING:
    from app.ml.serving.engine import Engine
    from app.ml.serving.vllm_backend import VllmOptions
    from app.ml.serving.vllm_engine import VllmEngine

    ServingEngine = Engine | VllmEngine


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
        vllm: "VllmOptions | None" = None,
    ) -> None:
        """Answers on the device and in the precision that training uses here; a request
        is ended after `timeout_seconds`. With `vllm`, vLLM servers answer instead, for
        every model but those trained on a quantized base (vLLM's CPU build has no
        bitsandbytes): the built-in engine answers those."""
        self.device = device_plan.device
        self.precision = device_plan.precision
        self.cpu_count = device_plan.capabilities.cpu_count
        self.model_cache_dir = model_cache_dir
        self.offline = offline
        self.configured_models = configured_models
        self.limits = limits or EngineLimits()
        self.timeout_seconds = timeout_seconds
        self.vllm = vllm
        self._engines: dict[str, ServingEngine] = {}
        self._engines_lock = threading.Lock()

    def engine(self, base_model: str, quantization: str = "none") -> "ServingEngine":
        """The base model's engine (its weights quantized as `quantization` says), loading
        the model the first time (seconds: call it off the event loop). An engine that has
        closed is replaced."""
        from app.ml.serving.engine import Engine

        quantized = cast(Quantization, quantization)
        name = base_model if quantized == "none" else f"{base_model} ({quantized})"
        with self._engines_lock:
            engine = self._engines.get(name)
            if engine is None or engine.closed:
                model_dir = resolve_model_dir(
                    base_model,
                    cache_dir=self.model_cache_dir,
                    offline=self.offline,
                    configured=self.configured_models,
                    precision=self.precision,
                )
                if self.vllm is not None and quantized == "none":
                    from app.ml.serving.vllm_backend import vllm_engine

                    self._engines[name] = vllm_engine(
                        base_model, model_dir, self.vllm, precision=self.precision
                    )
                    return self._engines[name]
                # Never merged into quantized weights: peft would round the update into them
                limits = self.limits if quantized == "none" else self.unmerged_limits
                self._engines[name] = Engine(
                    base_model=base_model,
                    load=lambda: self._load(model_dir, quantized),
                    device=self.device,
                    precision=self.precision,
                    limits=limits,
                    between_steps=self._cpu_threads(),
                )
            return self._engines[name]

    def builtin_engine(self, base_model: str) -> "Engine":
        """The built-in engine of `base_model` (its benchmarks and tests): never vLLM's."""
        from app.ml.serving.engine import Engine

        engine = self.engine(base_model)
        if not isinstance(engine, Engine):
            raise TypeError(f"{base_model} is served by vLLM here, not the built-in engine")
        return engine

    def _cpu_threads(self) -> Callable[[], None] | None:
        """On a CPU, an engine's threads keep off the cores other programs use (a training
        job beside the service, another service), as training's do: beside one busy core,
        two threads decoded the built-in model 4.4x slower than one (217 against 949
        tokens/s, 8 rows; alone, 1,016 and 985)."""
        if self.device != "cpu":
            return None
        from app.ml.cpu_share import share_cpu_from_this_thread

        return share_cpu_from_this_thread(self.cpu_count)

    @property
    def unmerged_limits(self) -> EngineLimits:
        return replace(self.limits, merge_budget_bytes=0)

    def _load(self, model_dir: Path, quantization: Quantization) -> tuple[Any, Any]:
        from app.ml.models import load_causal_lm, load_tokenizer
        from app.ml.precision import DTYPES

        model = load_causal_lm(
            model_dir, dtype=DTYPES[self.precision], device=self.device, quantization=quantization
        )
        return model.eval(), load_tokenizer(model_dir)

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
        if engines:
            from app.ml.memory import release_memory

            release_memory(self.device)
        return len(engines)

    def stats(self) -> list[EngineStats]:
        return [engine.stats() for engine in list(self._engines.values())]

    @property
    def loaded(self) -> dict[str, list[str]]:
        return {stats.base_model: stats.adapters for stats in self.stats()}
