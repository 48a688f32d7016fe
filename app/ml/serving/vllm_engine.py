"""A base model served by vLLM: the built-in `Engine`'s interface over vLLM's HTTP API.

qatune still renders every prompt itself (the chat template, the system prompt an adapter
was trained with, the tools) and sends vLLM token ids, so that both backends read the same
tokens and greedy answers agree. Requests stream from one of the base model's replicas
(vllm_replicas.py) on an event loop of this engine's own thread; their events reach the
caller through `on_event`, as the built-in engine's do.

An adapter is loaded into a replica on its first request there, and probed
(vllm_adapters.py).
"""

import asyncio
import json
import math
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import httpx

from app.ml.serving.requests import (
    AdapterNotServed,
    AdapterRef,
    BackendUnavailable,
    EngineStats,
    FinishReason,
    GenerationRequest,
    PromptTooLong,
    ReplicaStats,
    TextDelta,
    finish,
    tell,
)
from app.ml.serving.vllm_adapters import load_adapter, reason_of, unload_adapter
from app.ml.serving.vllm_replicas import Replica, check, route

HEALTH_EVERY_S = 2.0
PLACE_TIMEOUT_S = 120.0  # loading and probing an adapter, at most


class VllmEngine:
    def __init__(
        self,
        *,
        base_model: str,
        tokenizer: Any,
        context: int,
        replicas: list[Replica],
        probe_ids: list[int],
        max_lora_rank: int,
        start_seconds: float,
        eos_ids: frozenset[int] = frozenset(),
    ) -> None:
        self.base_model = base_model
        self.device = "vllm"  # wherever its servers run
        self.tokenizer = tokenizer
        self.context = context
        self.replicas = replicas
        self.probe_ids = probe_ids
        self.max_lora_rank = max_lora_rank
        self.start_seconds = start_seconds
        # vLLM's token_ids end with the end of turn; the built-in engine's answers do not
        # hold it, nor count it in usage: dropped here, so the two count the same.
        self.eos_ids = eos_ids
        self._closing = False
        self._generated_tokens = self._finished_requests = 0
        self._loads: dict[tuple[str, str], asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=None),  # a long answer streams for minutes
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=64),
        )
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"vllm:{base_model}", daemon=True
        )
        self._thread.start()
        for replica in replicas:
            if replica.server is not None and not replica.server.alive:
                replica.start()
        self._call(self._check_all(), timeout=10.0)  # the operator's servers: up already?
        self._health = asyncio.run_coroutine_threadsafe(self._watch(), self._loop)

    # ------------------------------------------------------------------ any thread
    def submit(self, request: GenerationRequest) -> None:
        """Send a request to a replica (blocking while its adapter loads: call it off the
        event loop). BackendUnavailable: no replica is up; AdapterNotServed: refused."""
        if len(request.prompt_ids) >= self.context:
            raise PromptTooLong(len(request.prompt_ids), self.base_model, self.context)
        self._call(self._place(request), timeout=PLACE_TIMEOUT_S)

    def wait_until_up(self) -> None:
        """Until a replica passes its health check, for a caller with no one to send a 503
        to (`qatune ask`): at most `start_seconds`, then BackendUnavailable."""
        deadline = time.monotonic() + self.start_seconds
        while not any(replica.healthy for replica in self.replicas):
            if time.monotonic() > deadline:
                raise BackendUnavailable(self._why_down(), retry_after=self._retry_after())
            time.sleep(HEALTH_EVERY_S / 2)

    @property
    def closed(self) -> bool:
        return self._closing

    def stats(self) -> EngineStats:
        return EngineStats(
            base_model=self.base_model,
            running=sum(replica.in_flight for replica in self.replicas),
            waiting=0,  # vLLM queues them itself
            adapters=sorted({name for replica in self.replicas for name in replica.adapters}),
            adapter_bytes=0,
            generated_tokens=self._generated_tokens,
            finished_requests=self._finished_requests,
            backend="vllm",
            replicas=[
                ReplicaStats(r.url, r.healthy, r.in_flight, len(r.adapters), r.problem, r.restarts)
                for r in self.replicas
            ],
        )

    def preload(self, adapter: AdapterRef) -> None:
        """Load (and probe) an adapter on the server its requests will go to, now."""
        self._call(self._preload(adapter), timeout=PLACE_TIMEOUT_S)

    def forget_adapters(self, prefix: str) -> None:
        """Unload a deleted model's adapter and its checkpoints' from every replica."""
        self._call(self._forget(prefix), timeout=60.0)

    def close(self) -> None:
        """Stop streaming (requests end with an error) and the servers qatune started."""
        self._closing = True
        self._health.cancel()
        try:
            self._call(self._shutdown(), timeout=15.0)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=15)
            for replica in self.replicas:
                if replica.server is not None:
                    replica.server.stop()

    def _call(self, work: Any, *, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()
            raise BackendUnavailable(
                f"the vLLM servers of {self.base_model} did not answer in {timeout:.0f} s",
                retry_after=10,
            ) from None

    # ------------------------------------------------------------ the loop's thread
    async def _place(self, request: GenerationRequest) -> None:
        adapter = request.adapter
        name = adapter.key if adapter else None
        for _ in range(len(self.replicas)):
            replica = route(self.replicas, name)
            if replica is None:
                break
            if adapter is not None and adapter.key not in replica.adapters:
                try:
                    await self._load(replica, adapter)
                except httpx.TransportError as exc:
                    replica.mark_down(f"unreachable: {exc!r}")
                    continue
            replica.in_flight += 1
            request.submitted_at = time.monotonic()
            task = self._loop.create_task(self._stream(replica, request))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        raise BackendUnavailable(self._why_down(), retry_after=self._retry_after())

    def _why_down(self) -> str:
        problems = "; ".join(f"{r.url or 'starting'}: {r.problem}" for r in self.replicas)
        return f"no vLLM server of {self.base_model} is up ({problems})"

    def _retry_after(self) -> int:
        starting = [r for r in self.replicas if r.server is not None]
        if not starting:
            return 10
        elapsed = min(time.monotonic() - r.started_at for r in starting)
        return max(5, min(60, math.ceil(self.start_seconds - elapsed)))

    async def _preload(self, adapter: AdapterRef) -> None:
        replica = route(self.replicas, adapter.key)
        if replica is None:
            raise BackendUnavailable(self._why_down(), retry_after=self._retry_after())
        await self._load(replica, adapter)

    async def _load(self, replica: Replica, adapter: AdapterRef) -> None:
        lock = self._loads.setdefault((replica.url, adapter.key), asyncio.Lock())
        async with lock:  # one load of an adapter at a time per server
            if adapter.key not in replica.adapters:
                await load_adapter(
                    self._client,
                    replica,
                    adapter,
                    base_model=self.base_model,
                    probe_ids=self.probe_ids,
                    max_lora_rank=self.max_lora_rank,
                )

    async def _stream(self, replica: Replica, request: GenerationRequest) -> None:
        sampling = request.sampling
        body = {
            "model": request.adapter.key if request.adapter else self.base_model,
            "prompt": request.prompt_ids,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "min_p": sampling.min_p,
            "seed": sampling.seed,
            "stop": list(sampling.stop) or None,
            "ignore_eos": sampling.ignore_eos,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
        }
        reason: FinishReason | None = None
        elsewhere = False  # the server was gone before the answer began: another takes it
        try:
            async with asyncio.timeout(max(0.0, request.deadline - time.monotonic())):
                reason = await self._read(replica, request, body)
        except TimeoutError:
            finish(request, FinishReason.ERROR, "the answer did not finish in time")
        except httpx.HTTPError as exc:
            replica.mark_down(f"failed a request: {exc!r}")
            elsewhere = isinstance(exc, httpx.ConnectError) and not request.generated
            if not elsewhere:
                finish(request, FinishReason.ERROR, f"the vLLM server went away: {exc!r}")
        except asyncio.CancelledError:
            finish(request, FinishReason.ERROR, "the vLLM client stopped")
        finally:
            replica.in_flight -= 1
        if elsewhere and not request.cancelled:
            try:
                await self._place(request)
            except (BackendUnavailable, AdapterNotServed) as exc:
                finish(request, FinishReason.ERROR, str(exc))
            return
        self._generated_tokens += len(request.generated)
        self._finished_requests += 1
        if reason is None:
            finish(request, FinishReason.ERROR, "the vLLM server ended the answer unfinished")
        else:
            finish(request, reason)  # a refusal has finished it already, with its words

    async def _read(
        self, replica: Replica, request: GenerationRequest, body: dict[str, Any]
    ) -> FinishReason | None:
        """Stream one answer into `request`; why it ended (None: the stream ended without
        saying)."""
        url = replica.url + "/v1/completions"
        async with self._client.stream("POST", url, json=body, headers=replica.headers) as reply:
            if reply.status_code != 200:
                await reply.aread()
                finish(request, FinishReason.ERROR, f"vLLM refused it: {reason_of(reply)}")
                return FinishReason.ERROR
            reason = None
            async for line in reply.aiter_lines():
                if request.cancelled:
                    return FinishReason.CANCELLED
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line.removeprefix("data: ")).get("choices", []):
                    tokens = choice.get("token_ids") or ()
                    if not request.sampling.ignore_eos:
                        tokens = [t for t in tokens if t not in self.eos_ids]
                    request.generated.extend(tokens)
                    if request.first_token_at is None and request.generated:
                        request.first_token_at = time.monotonic()
                    if text := choice.get("text"):
                        request.text_sent += text
                        if request.stream_text:
                            tell(request, TextDelta(text))
                    if said := choice.get("finish_reason"):
                        reason = FinishReason.LENGTH if said == "length" else FinishReason.STOP
                if request.enough is not None and request.enough(request.generated):
                    return FinishReason.STOP
            return FinishReason.CANCELLED if request.cancelled else reason

    async def _forget(self, prefix: str) -> None:
        for replica in self.replicas:
            gone = [k for k in replica.adapters if k == prefix or k.startswith(prefix + "@")]
            for key in gone:
                await unload_adapter(self._client, replica, key)

    async def _watch(self) -> None:
        while not self._closing:
            await asyncio.sleep(HEALTH_EVERY_S)
            await self._check_all()

    async def _check_all(self) -> None:
        if self._closing:
            return
        await asyncio.gather(
            *(
                check(self._client, replica, self.base_model, self.start_seconds)
                for replica in self.replicas
            )
        )

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.aclose()
