"""QueryService: answers questions with fine-tuned adapters.

Each base model is loaded once on the service's device and kept; adapters are loaded onto
it on first use and kept in a bounded LRU. One lock per base model serialises generation
on it, since the active adapter is state of the shared model. Callers run `answer` in a
worker thread, never on the event loop.
"""

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.ml.device import DevicePlan
from app.ml.generation import DTYPES, generate_answer
from app.ml.models import load_causal_lm, load_tokenizer, resolve_model_dir
from app.ml.pairs import QAPair
from app.ml.training.adapter_files import AdapterInvalid, read_adapter_metadata


@dataclass
class _LoadedBase:
    model: Any
    tokenizer: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    adapters: OrderedDict[str, Path] = field(default_factory=OrderedDict)


@dataclass(frozen=True)
class Answer:
    answer: str
    base_model: str
    adapter: str | None
    device: str
    seconds: float


class QueryService:
    def __init__(
        self,
        *,
        device_plan: DevicePlan,
        model_cache_dir: Path,
        offline: bool,
        configured_models: tuple[str, ...] = (),
        cache_size: int = 4,
    ) -> None:
        """Answers on the device and in the precision that training uses here."""
        self.device = device_plan.device
        self.precision = device_plan.precision
        self.model_cache_dir = model_cache_dir
        self.offline = offline
        self.configured_models = configured_models
        self.cache_size = cache_size
        self._bases: dict[str, _LoadedBase] = {}
        self._bases_lock = threading.Lock()

    def answer(
        self,
        question: str,
        *,
        system: str | None = None,
        adapter_key: str | None,
        adapter_dir: Path | None,
        base_model: str,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
    ) -> Answer:
        """Answer with the adapter (or with the bare base model when adapter_key is None)."""
        started = time.perf_counter()
        if system is None and adapter_dir is not None:  # answer as the adapter was trained
            system = read_adapter_metadata(adapter_dir).system_prompt
        messages = QAPair(question, "", system).prompt_messages()
        base = self._base(base_model)
        with base.lock:
            model = base.model
            if adapter_key is not None and adapter_dir is not None:
                model = self._activate(base, adapter_key, adapter_dir, base_model)
                text = self._generate(base, model, messages, max_new_tokens, temperature, top_p)
            elif hasattr(model, "disable_adapter"):
                with model.disable_adapter():
                    text = self._generate(base, model, messages, max_new_tokens, temperature, top_p)
            else:
                text = self._generate(base, model, messages, max_new_tokens, temperature, top_p)
        return Answer(text, base_model, adapter_key, self.device, time.perf_counter() - started)

    def forget_adapter(self, adapter_key: str) -> None:
        """Drop one adapter (its job was deleted)."""
        for base in list(self._bases.values()):
            with base.lock:
                if adapter_key in base.adapters:
                    base.adapters.pop(adapter_key)
                    base.model.delete_adapter(adapter_key)

    def drop_cached(self) -> int:
        """Unload every model (a training job needs the memory); returns how many."""
        with self._bases_lock:
            dropped = len(self._bases)
            self._bases.clear()
        from app.ml.memory import release_memory

        release_memory(self.device)
        return dropped

    @property
    def loaded(self) -> dict[str, list[str]]:
        return {name: list(base.adapters) for name, base in self._bases.items()}

    def _base(self, base_model: str) -> _LoadedBase:
        with self._bases_lock:
            if base_model not in self._bases:
                model_dir = resolve_model_dir(
                    base_model,
                    cache_dir=self.model_cache_dir,
                    offline=self.offline,
                    configured=self.configured_models,
                )
                model = load_causal_lm(model_dir, dtype=DTYPES[self.precision], device=self.device)
                model.eval()
                self._bases[base_model] = _LoadedBase(model, load_tokenizer(model_dir))
            return self._bases[base_model]

    def _activate(self, base: _LoadedBase, key: str, adapter_dir: Path, base_model: str) -> Any:
        from peft import PeftModel

        if key in base.adapters:
            base.adapters.move_to_end(key)
        else:
            metadata = read_adapter_metadata(adapter_dir)
            if metadata.base_model != base_model:
                raise AdapterInvalid(
                    f"Adapter was trained on {metadata.base_model!r}, not {base_model!r}"
                )
            if isinstance(base.model, PeftModel):
                base.model.load_adapter(adapter_dir, adapter_name=key, is_trainable=False)
            else:
                base.model = PeftModel.from_pretrained(
                    base.model, adapter_dir, adapter_name=key, is_trainable=False
                )
            base.model.eval()
            base.adapters[key] = adapter_dir
            while len(base.adapters) > self.cache_size:
                evicted, _ = base.adapters.popitem(last=False)
                base.model.delete_adapter(evicted)
        base.model.set_adapter(key)
        return base.model

    def _generate(
        self,
        base: _LoadedBase,
        model: Any,
        messages: list[dict[str, str]],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
    ) -> str:
        return generate_answer(
            model,
            base.tokenizer,
            messages,
            device=self.device,
            precision=self.precision,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
        )
