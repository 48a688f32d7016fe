"""The adapters loaded on one engine's base model, and the model they make together.

An adapter loads on first use; when the count or the bytes are at their limit the least
recently used one goes first, never one a running row uses. The first adapter wraps the
base model in peft's PeftModel; the last one to go takes the wrapper with it, since a
PeftModel without adapters fails every forward (KeyError in active_peft_config), which
would end every request on the base. Used on the engine's thread only.
"""

import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch
from loguru import logger

from app.core.language import tr
from app.ml.precision import DTYPES
from app.ml.scope import Scope, features, load_scope
from app.ml.serving.adapter_modes import BASE, AdapterModes
from app.ml.serving.requests import AdapterRef, EngineLimits
from app.ml.training.adapter_metadata import AdapterInvalid, read_adapter_metadata


class NoRoom(Exception):
    """Every cached adapter is in use by a running row; the request waits."""


class AdapterCache:
    def __init__(
        self, model: Any, *, base_model: str, device: str, precision: str, limits: EngineLimits
    ) -> None:
        self.model = model  # the bare base, or a PeftModel around it while adapters are loaded
        self.base_model = base_model
        self.device = device
        self.precision = precision
        self.limits = limits
        self.modes: AdapterModes | None = None  # while an adapter is loaded
        self._sizes: OrderedDict[str, int] = OrderedDict()  # key → bytes, LRU order
        self._scopes: dict[str, Scope] = {}  # key → its scope, for adapters that have one

    @property
    def keys(self) -> list[str]:
        return list(self._sizes)

    @property
    def bytes(self) -> int:
        return sum(self._sizes.values())

    def forward_options(
        self, adapters: list[str], running: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """Put the model in the mode for a step over rows of these adapters."""
        if self.modes is None:  # no adapter loaded: a plain model
            return {}
        return self.modes.forward_options(adapters, running)

    def ensure(self, ref: AdapterRef | None, in_use: set[str]) -> str:
        """The key the request's rows run with, loading its adapter if needed (NoRoom if
        every loaded one is `in_use`; AdapterInvalid for a bad or foreign adapter)."""
        if ref is None:
            return BASE
        if ref.key in self._sizes:
            self._sizes.move_to_end(ref.key)
            return ref.key
        metadata = read_adapter_metadata(ref.directory)
        if metadata.base_model != self.base_model:
            raise AdapterInvalid(
                tr(
                    "The adapter was trained on {base_model!r}, not {served!r}",
                    base_model=metadata.base_model,
                    served=self.base_model,
                )
            )
        size = (ref.directory / "adapter_model.safetensors").stat().st_size
        while self._sizes and (
            len(self._sizes) >= self.limits.max_adapters
            or self.bytes + size > self.limits.max_adapter_bytes
        ):
            idle = next((key for key in self._sizes if key not in in_use), None)
            if idle is None:
                raise NoRoom
            self.unload(idle)
        self._load(ref.key, ref.directory)
        self._sizes[ref.key] = size
        scope = load_scope(ref.directory)
        if scope is not None:
            self._scopes[ref.key] = scope
        return ref.key

    def answering(self, key: str, question_ids: list[int] | None, running: frozenset[str]) -> str:
        """Who answers the question: the adapter `key`, or the base where the question is
        outside the adapter's scope (scope.py), which reads the base model's features.
        `running`: the batch's adapters, whose mode the extra forward pass keeps."""
        scope = self._scopes.get(key)
        if scope is None or not question_ids:
            return key
        self.forward_options([BASE], running)
        (inside,) = scope.inside(features(self.model, [question_ids], self.device))
        return key if inside else BASE

    def of_model(self, prefix: str) -> list[str]:
        """The loaded keys of a model: its adapter and its checkpoints' (`prefix@step`)."""
        return [key for key in self._sizes if key == prefix or key.startswith(prefix + "@")]

    def unload(self, key: str) -> None:
        self._sizes.pop(key, None)
        self._scopes.pop(key, None)
        self._remove_layers(key)

    def _load(self, key: str, directory: Path) -> None:
        from peft import PeftModel

        started = time.perf_counter()
        try:
            # Normal tensors, not inference ones: they outlive this step and get set_adapter'd.
            with torch.inference_mode(False):
                if self.modes is not None:
                    self.modes.unmerge()  # new LoRA layers go onto the base weights
                    self.model.load_adapter(directory, adapter_name=key, is_trainable=False)
                else:
                    self.model = PeftModel.from_pretrained(
                        self.model, directory, adapter_name=key, is_trainable=False
                    )
                    budget = self.limits.merge_budget_bytes
                    self.modes = AdapterModes(self.model, budget, self.device)
                    self.modes.active = key
                    # peft froze the base. torch 2.13 on a CPU multiplies a frozen bf16
                    # weight by a strided activation (the prompt's last position, in
                    # prefill) 35x slower than an unfrozen one; inference mode builds no
                    # graph either way. bench/serve_throughput.py found it.
                    head = self.model.get_base_model().get_output_embeddings()
                    if head is not None:
                        head.weight.requires_grad_(True)
                self.modes.restack(DTYPES[self.precision])
        except Exception as exc:  # a corrupt file raises whatever its reader raises
            self._remove_layers(key)  # half-loaded: its layers may have been injected
            raise AdapterInvalid(tr("The adapter could not be loaded: {exc}", exc=exc)) from exc
        self.model.eval()
        logger.info(
            "Loaded adapter {} on {} in {:.2f} s",
            key,
            self.base_model,
            time.perf_counter() - started,
        )

    def _remove_layers(self, key: str) -> None:
        from peft import PeftModel

        if not isinstance(self.model, PeftModel) or key not in self.model.peft_config:
            return
        with torch.inference_mode(False):
            if self.modes is not None:
                self.modes.forget(key)  # unmerged first: the base weights come back exact
            if set(self.model.peft_config) == {key}:  # the last one: the wrapper goes too
                if self.modes is not None:
                    self.modes.release()
                self.model = self.model.unload().eval()
                self.modes = None
                return
            self.model.delete_adapter(key)
            if self.modes is not None:
                self.modes.restack(DTYPES[self.precision])
