"""One engine per base model: a thread that decodes every running request together.

Continuous batching: between two decode steps, finished or cancelled requests leave and
waiting ones join (their prompts prefilled together, prefill.py). Rows may use different adapters
of the same base: a step whose rows share one adapter runs it merged; a mixed step adds
each row's own LoRA delta (lora_bank.py). An adapter not loaded yet is read on another
thread (adapter_cache.py): the requests behind it go on. Callers hear back through `on_event`,
called on this thread, and never wait for it: the event loop only ever enqueues.

Every request that was submitted ends with exactly one `Finished`, by its deadline,
whatever raised: a failure while a request joins ends that request only, a failed step
ends the rows of that step, and the engine goes on serving the others.
"""

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import nullcontext
from typing import Any, TypeVar

import torch
from loguru import logger

from app.ml.precision import DTYPES, autocast_for
from app.ml.serving.adapter_cache import AdapterCache, NoRoom, NotReadYet
from app.ml.serving.batch import Row, RunningBatch
from app.ml.serving.decoding import eos_ids, pick_token, shown_text
from app.ml.serving.kv_budget import KvBudget
from app.ml.serving.prefill import Joining, prefill, prefill_groups
from app.ml.serving.requests import (
    EngineLimits,
    EngineStats,
    FinishReason,
    GenerationRequest,
    PromptTooLong,
    QueueFull,
    TextDelta,
    finish,
    tell,
)
from app.ml.serving.text import answer_text
from app.ml.serving.waiting import WaitingLine
from app.ml.training.adapter_metadata import AdapterInvalid

Result = TypeVar("Result")


class Engine:
    def __init__(
        self,
        *,
        base_model: str,
        load: Callable[[], tuple[Any, Any]],
        device: str,
        precision: str,
        limits: EngineLimits,
        between_steps: Callable[[], None] | None = None,
    ) -> None:
        """Start the engine's thread, which loads (model, tokenizer) with `load` and then
        owns them: every use of the model happens on that thread, so that one OpenMP team
        does all the work (a second thread's team, idle but spinning, halved decode speed
        on a 2-core machine). `between_steps` runs on that thread before each step (the
        training child's share of the CPU: torch's thread count is per thread)."""
        self.base_model = base_model
        self._between_steps = between_steps or (lambda: None)
        self.device = device
        self.precision = precision
        self.limits = limits
        self._waiting = WaitingLine()
        self._calls: deque[tuple[Callable[[], Any], Future[Any]]] = deque()
        self._batch = RunningBatch()
        self.adapters: AdapterCache  # made with the model, on the engine's thread
        self._wake = threading.Condition()
        self._closing = False
        self._generated_tokens = self._finished_requests = 0  # written by the engine thread
        self._news = 0  # requests, calls and finished reads so far: what may unblock a wait
        self._stalled_at: int | None = None  # `_news` when only adapter reads were left
        loaded: Future[tuple[Any, Any]] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(load, loaded), name=f"engine:{base_model}", daemon=True
        )
        self._thread.start()
        model, self.tokenizer = loaded.result()  # the loader's exception, if it failed
        self.kv = KvBudget.for_model(model.config, DTYPES[precision], limits)
        self.context = self.kv.context
        self.eos_ids = eos_ids(model, self.tokenizer)
        mps = device == "mps"  # no autocast there: the weights are in their serving dtype
        self._autocast = nullcontext() if mps else autocast_for(device, precision)

    # ------------------------------------------------------------------ any thread
    def submit(self, request: GenerationRequest) -> None:
        """Queue a request; QueueFull if too many wait already, PromptTooLong if it cannot fit."""
        if len(request.prompt_ids) >= self.context:
            raise PromptTooLong(len(request.prompt_ids), self.base_model, self.context)
        with self._wake:
            if self._closing:
                raise QueueFull(self._waiting.of(request.caller), retry_after=5)
            # Those the batch's free rows take at the next step are not waiting: a burst on
            # an idle engine counted them all and refused half (the engine admits between
            # steps). Each caller's own count: another's burst does not refuse this one.
            free_rows = max(0, self.limits.max_batch - len(self._batch))
            queued = self._waiting.of(request.caller) - free_rows
            if queued >= self.limits.max_waiting:  # wait about a batch's turn each
                ahead = len(self._waiting) - free_rows
                retry = max(1, ahead // max(1, self.limits.max_batch))
                raise QueueFull(queued, retry_after=retry)
            request.submitted_at = time.monotonic()
            self._waiting.append(request)
            self._news += 1
            self._wake.notify()

    @property
    def model(self) -> Any:
        """The base model, with the loaded adapters (engine thread only)."""
        return self.adapters.model

    @property
    def closed(self) -> bool:
        """Closed, or its thread is gone: a new engine must take its place."""
        return self._closing or not self._thread.is_alive()

    def stats(self) -> EngineStats:
        return EngineStats(
            base_model=self.base_model,
            running=len(self._batch),
            waiting=len(self._waiting),
            adapters=self.adapters.keys,
            adapter_bytes=self.adapters.bytes,
            generated_tokens=self._generated_tokens,
            finished_requests=self._finished_requests,
        )

    def call(self, work: Callable[[], Result]) -> Result:
        """Run `work` on the engine's thread between two steps, and return its result."""
        done: Future[Result] = Future()
        with self._wake:
            if self._closing:
                raise RuntimeError(f"the engine for {self.base_model} is closed")
            self._calls.append((work, done))
            self._news += 1
            self._wake.notify()
        return done.result()

    def forget_adapters(self, prefix: str) -> None:
        """Unload adapters whose key starts with `prefix` (a deleted model and its
        checkpoints); requests using them end with an error."""
        self.call(lambda: self._forget(prefix))

    def _forget(self, prefix: str) -> None:
        self.adapters.forget_reads(prefix)
        gone = self.adapters.of_model(prefix)
        self._end_rows("the model was deleted", lambda row: row.adapter in gone)
        for key in gone:
            self.adapters.unload(key)

    def close(self) -> None:
        """End every request (they may retry) and stop the thread."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout=30)

    # -------------------------------------------------------------- engine thread
    def _run(self, load: Callable[[], tuple[Any, Any]], loaded: "Future[tuple[Any, Any]]") -> None:
        try:
            model, tokenizer = load()
        except BaseException as exc:
            loaded.set_exception(exc)
            return
        self.adapters = AdapterCache(
            model,
            base_model=self.base_model,
            device=self.device,
            precision=self.precision,
            limits=self.limits,
            on_read=self._read_done,
        )
        loaded.set_result((model, tokenizer))
        try:
            while True:
                try:
                    if not self._serve_once():
                        break
                except Exception as exc:  # outside any one request: end those in flight
                    logger.exception("Serving {} failed", self.base_model)
                    self._end_everything(f"generation failed: {exc}")
        finally:
            with self._wake:
                self._closing = True
            self.adapters.close()
            self._end_everything("the server is shutting down")

    def _read_done(self) -> None:
        """(the adapter reader's thread) An adapter's files are read: its requests may join."""
        with self._wake:
            self._news += 1
            self._wake.notify()

    def _serve_once(self) -> bool:
        """Calls, expiries, admissions and one decode step; False once closing."""
        with self._wake:
            busy = self._batch.rows or self._calls or self._closing
            if self._stalled_at == self._news and not busy:  # every waiting one is being read
                self._wake.wait(timeout=1.0)  # (and past a second, expiries are checked)
            self._stalled_at = None
            while not (self._waiting or self._batch.rows or self._calls or self._closing):
                self._wake.wait()
            if self._closing:
                return False
            calls = list(self._calls)
            self._calls.clear()
        for work, done in calls:
            try:
                done.set_result(work())
            except Exception as exc:
                done.set_exception(exc)
        self._expire_waiting()
        self._between_steps()
        try:
            with torch.inference_mode(), self._autocast:
                self._admit()
                if self._batch.rows:
                    self._step()
        except Exception as exc:  # a bug or out of memory: fail these rows, keep serving
            logger.exception("Serving {} failed a step", self.base_model)
            self._end_rows(f"generation failed: {exc}")
        return True

    def _end_rows(self, why: str, which: Callable[[Row], bool] = lambda row: True) -> None:
        """End the running rows `which` picks with an error; the others go on."""
        kept = []
        for i, row in enumerate(self._batch.rows):
            if which(row):
                self._finish(row.request, FinishReason.ERROR, why)
            else:
                kept.append(i)
        self._batch.keep(kept)

    def _end_everything(self, why: str) -> None:
        self._end_rows(why)
        with self._wake:
            waiting = self._waiting.clear()
            calls, self._calls = list(self._calls), deque()
        for request in waiting:
            self._finish(request, FinishReason.ERROR, why)
        for _, done in calls:
            done.set_exception(RuntimeError(f"{self.base_model}: {why}"))

    def _expire_waiting(self) -> None:
        """Requests that waited past their deadline (or whose caller left) end now."""
        now = time.monotonic()
        with self._wake:
            gone = [r for r in self._waiting if r.cancelled or now > r.deadline]
            for request in gone:
                self._waiting.remove(request)
        for request in gone:
            if request.cancelled:
                self._finish(request, FinishReason.CANCELLED)
            else:
                self._finish(request, FinishReason.ERROR, "the request waited past its time limit")

    def _admit(self) -> None:
        """Waiting requests join, a turn per caller (waiting.py), while there is room
        (kv_budget.py, and room for their adapter), their prompts prefilled together: one
        pass over the weights."""
        joining: list[Joining] = []
        reserved = [self.kv.tokens(row.request) for row in self._batch.rows]
        passed: list[GenerationRequest] = []  # their adapter is read or has no room yet
        news = self._news
        while True:
            with self._wake:
                if not self._waiting or not self.kv.room_for(reserved, self._waiting.first()):
                    break
                request = self._waiting.take()
            if request.cancelled:
                self._finish(request, FinishReason.CANCELLED)
                continue
            in_use = self._batch.adapters | {adapter for _, adapter in joining}
            try:
                key = self.adapters.ensure(request.adapter, in_use=in_use)
                answering = self.adapters.answering(key, request.question_ids, frozenset(in_use))
                if answering != key and request.base_prompt_ids is not None:
                    request.prompt_ids = request.base_prompt_ids  # the scope gave it the base
                key = answering
                joining.append((request, key))
                reserved.append(self.kv.tokens(request))
            except (NotReadYet, NoRoom):  # its turn comes when the read ends or a row leaves
                passed.append(request)
            except AdapterInvalid as exc:
                self._finish(request, FinishReason.ERROR, str(exc))
            except Exception as exc:  # this request could not join; the batch goes on
                logger.exception("Serving {} could not start a request", self.base_model)
                self._finish(request, FinishReason.ERROR, f"generation failed: {exc}")
        self.adapters.keep_reads({r.adapter.key for r in passed if r.adapter is not None})
        if passed:
            with self._wake:
                self._waiting.put_back(passed)
                if not joining and not self._batch.rows:
                    self._stalled_at = news
        for group in prefill_groups(joining):
            self._start(group)

    def _start(self, group: list[Joining]) -> None:
        """Prefill the group; if that fails, each request alone: one request's fault ends
        that request only."""
        try:
            self._prefill(group)
        except Exception as exc:
            if len(group) > 1:
                for one in group:
                    self._start([one])
                return
            logger.exception("Serving {} could not start a request", self.base_model)
            self._finish(group[0][0], FinishReason.ERROR, f"generation failed: {exc}")

    def _prefill(self, group: list[Joining]) -> None:
        running = frozenset(self._batch.adapters)
        rows, cache, mask = prefill(self.model, self.adapters, group, running, self.device)
        kept = [len(self._batch) + i for i, row in enumerate(rows) if self._accept(row)]
        self._batch.join(rows, cache, mask)
        self._batch.keep([*range(len(self._batch) - len(rows)), *kept])

    def _step(self) -> None:
        inputs = self._batch.step_inputs()
        extra = self.adapters.forward_options([row.adapter for row in self._batch.rows])
        out = self.model(**inputs, logits_to_keep=1, **extra)
        logits = out.logits[:, -1]
        greedy = logits.argmax(dim=-1).tolist()
        kept = []
        for i, row in enumerate(self._batch.rows):
            row.position += 1
            sampling = row.request.sampling
            try:
                row.next_token = (
                    greedy[i]
                    if sampling.temperature == 0
                    else pick_token(logits[i], sampling, row.generator)
                )
                if self._accept(row):
                    kept.append(i)
            except Exception as exc:  # this row's sampling or text: it ends, the rest go on
                logger.exception("Serving {} failed a row", self.base_model)
                self._finish(row.request, FinishReason.ERROR, f"generation failed: {exc}")
        self._batch.keep(kept)

    def _accept(self, row: Row) -> bool:
        """Take the row's new token: send its text; False once the request has ended."""
        request, sampling, token = row.request, row.request.sampling, row.next_token
        if request.cancelled:
            self._finish(request, FinishReason.CANCELLED)
            return False
        if time.monotonic() > request.deadline:
            self._finish(request, FinishReason.ERROR, "the request ran past its time limit")
            return False
        ended = token in self.eos_ids and not sampling.ignore_eos  # the end of turn: not shown
        if not ended:
            request.generated.append(token)
            ended = request.enough is not None and request.enough(request.generated)
        watched = request.stream_text or bool(sampling.stop)
        if ended or (watched and self._send(request, final=False)):  # or a stop sequence
            self._send(request, final=True)
            self._finish(request, FinishReason.STOP)
            return False
        if len(request.generated) >= sampling.max_tokens or row.position + 1 >= self.context:
            self._send(request, final=True)
            self._finish(request, FinishReason.LENGTH)
            return False
        return True

    def _send(self, request: GenerationRequest, *, final: bool) -> bool:
        """Send what is new and safe to show; True if a stop sequence ended the text."""
        text = answer_text(self.tokenizer, request.generated, final=final)
        new, stopped = shown_text(text, len(request.text_sent), request.sampling.stop, final=final)
        if new:
            request.text_sent += new
            tell(request, TextDelta(new))
        return stopped

    def _finish(
        self, request: GenerationRequest, reason: FinishReason, error: str | None = None
    ) -> None:
        """End the request: its one Finished (a second call does nothing)."""
        if finish(request, reason, error):
            self._generated_tokens += len(request.generated)
            self._finished_requests += 1
