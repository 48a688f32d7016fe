"""The adapters loaded on one engine's base model.

An adapter is read on a thread of its own (its files, laid out as the bank takes them):
the engine goes on stepping, and a request for a warm adapter never waits behind one for a
cold one. Added to the bank on the engine's thread, between steps, it costs one slot's
copy. When the bytes (or a count, if one is set) are at their limit the least recently
used adapter goes first, never one a running row uses. With none loaded the base runs as
it was loaded, no layer replaced. `ensure`, `answering`, `unload` and `forward_options`
are the engine thread's.
"""

import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
from loguru import logger

from app.core.language import tr
from app.ml.precision import DTYPES
from app.ml.scope import Scope, features, load_scope
from app.ml.serving.lora_bank import BASE, LoraBank, LoraWeights, read_lora
from app.ml.serving.requests import AdapterRef, EngineLimits
from app.ml.training.adapter_metadata import AdapterInvalid, read_adapter_metadata

READS_AHEAD = 4  # adapters read but not yet added, at most


class NoRoom(Exception):
    """Every cached adapter is in use by a running row; the request waits."""


class NotReadYet(Exception):
    """The adapter's files are being read; the request waits, others go on."""


@dataclass(frozen=True)
class ReadAdapter:
    weights: LoraWeights
    scope: Scope | None
    seconds: float


def _of_model(key: str, prefix: str) -> bool:
    """The model's own adapter, or one of its checkpoints' (`prefix@step`)."""
    return key == prefix or key.startswith(prefix + "@")


def _one_thread() -> None:
    # torch's thread count is per thread: one, so that this thread makes no OpenMP team
    # beside the engine's (a second team, idle but spinning, halves decode speed).
    torch.set_num_threads(1)


class AdapterCache:
    def __init__(
        self,
        model: Any,
        *,
        base_model: str,
        device: str,
        precision: str,
        limits: EngineLimits,
        on_read: Callable[[], None] = lambda: None,
    ) -> None:
        self.model = model  # the base; the bank's layers add the adapters' deltas
        self.base_model = base_model
        self.device = device
        self.precision = precision
        self.limits = limits
        self.bank: LoraBank | None = None  # while an adapter is loaded
        self._sizes: OrderedDict[str, int] = OrderedDict()  # key → bytes, LRU order
        self._scopes: dict[str, Scope] = {}  # key → its scope, for adapters that have one
        self._reads: dict[str, Future[ReadAdapter]] = {}
        self._on_read = on_read  # wakes the engine
        self._reader = ThreadPoolExecutor(
            1, thread_name_prefix=f"adapters:{base_model}", initializer=_one_thread
        )

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
        if self.bank is None:  # no adapter loaded: a plain model
            return {}
        return self.bank.forward_options(adapters, running)

    def ensure(self, ref: AdapterRef | None, in_use: set[str]) -> str:
        """The key the request's rows run with: NotReadYet while its adapter is read,
        NoRoom if every loaded one is `in_use`, AdapterInvalid for a bad or foreign one."""
        if ref is None:
            return BASE
        if ref.key in self._sizes:
            self._sizes.move_to_end(ref.key)
            return ref.key
        read = self._reads.get(ref.key)
        if read is None:
            if len(self._reads) >= READS_AHEAD:  # each holds an adapter's weights
                raise NotReadYet
            read = self._reads[ref.key] = self._reader.submit(self._read, ref)
            read.add_done_callback(lambda _: self._on_read())
        if not read.done():
            raise NotReadYet
        adapter = read.result()  # AdapterInvalid, raised by the reader
        size = adapter.weights.bytes
        while self._sizes and self._full(size):
            idle = next((key for key in self._sizes if key not in in_use), None)
            if idle is None:
                raise NoRoom  # (its read is kept for when a row leaves)
            self.unload(idle)
        del self._reads[ref.key]
        started = time.perf_counter()
        if self.bank is None:
            self.bank = LoraBank(
                self.model,
                merge_budget_bytes=self.limits.merge_budget_bytes,
                device=self.device,
                dtype=DTYPES[self.precision],
            )
        try:
            self.bank.add(ref.key, adapter.weights)
        except Exception:
            if not self.bank.keys:
                self._release()
            raise
        self._sizes[ref.key] = size
        if adapter.scope is not None:
            self._scopes[ref.key] = adapter.scope
        logger.info(
            "Loaded adapter {} on {}: read in {:.2f} s, added in {:.3f} s ({} loaded)",
            ref.key,
            self.base_model,
            adapter.seconds,
            time.perf_counter() - started,
            len(self._sizes),
        )
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
        return [key for key in self._sizes if _of_model(key, prefix)]

    def forget_reads(self, prefix: str) -> None:
        """Reads of a deleted model's adapters: a later request reads its files again."""
        for key in [k for k in self._reads if _of_model(k, prefix)]:
            self._reads.pop(key).cancel()

    def keep_reads(self, wanted: set[str]) -> None:
        """Only the reads a waiting request still wants (the others' requests ended)."""
        for key in [k for k in self._reads if k not in wanted]:
            self._reads.pop(key).cancel()

    def unload(self, key: str) -> None:
        self._sizes.pop(key, None)
        self._scopes.pop(key, None)
        if self.bank is not None:
            self.bank.remove(key)
            if not self.bank.keys:
                self._release()

    def close(self) -> None:
        """The engine ends: no more reads, and the base as it was loaded (a training run
        goes on with it after its answer table)."""
        self._reader.shutdown(wait=False, cancel_futures=True)
        self._release()

    def _full(self, size: int) -> bool:
        counted = 0 < self.limits.max_adapters <= len(self._sizes)
        return counted or self.bytes + size > self.limits.max_adapter_bytes

    def _release(self) -> None:
        """The last adapter went: the base as it was loaded, no layer replaced."""
        if self.bank is not None:
            self.bank.release()
            self.bank = None

    def _read(self, ref: AdapterRef) -> ReadAdapter:
        started = time.perf_counter()
        metadata = read_adapter_metadata(ref.directory)
        if metadata.base_model != self.base_model:
            raise AdapterInvalid(
                tr(
                    "The adapter was trained on {base_model!r}, not {served!r}",
                    base_model=metadata.base_model,
                    served=self.base_model,
                )
            )
        try:
            weights = read_lora(ref.directory, DTYPES[self.precision])
            scope = load_scope(ref.directory)
        except AdapterInvalid:
            raise
        except Exception as exc:  # a corrupt file raises whatever its reader raises
            raise AdapterInvalid(tr("The adapter could not be loaded: {exc}", exc=exc)) from exc
        return ReadAdapter(weights, scope, time.perf_counter() - started)
