"""The vLLM servers of one base model: which are up (and restarting those qatune started),
which adapters each holds, where a request goes.

A request for an adapter goes to a replica that holds it (affinity: its weights are loaded
once, not on every server), picked by rendezvous hashing so that every qatune process picks
the same one; when that replica is much busier than the least busy, the request spills
over there and the adapter is loaded there too. A replica that fails a health check or a
request is out until it answers again; it then holds no adapter (a restarted vLLM has
forgotten them), so its adapters are loaded again where their requests go.
"""

import asyncio
import hashlib
import time
from dataclasses import dataclass, field

import httpx
from loguru import logger

from app.ml.serving.vllm_servers import CannotStart, ManagedServer

# Spill over when the replica that holds an adapter has this many requests in flight more
# than the least busy one: below that, loading the adapter a second time costs more than
# the wait (vLLM batches the requests anyway).
SPILL_OVER = 8
# A server that fails to come up is started again after 5 s, then 10, 20, 40; after
# MAX_FAILED_STARTS in a row qatune stops trying (the cause is the operator's to fix, and
# each try costs a minute of a loaded machine). One that ran and then died starts at once.
FIRST_BACKOFF_S = 5.0
MAX_FAILED_STARTS = 5


@dataclass
class Replica:
    url: str
    api_key: str | None
    server: ManagedServer | None = None  # started by qatune (None: the operator's)
    healthy: bool = False
    in_flight: int = 0
    adapters: set[str] = field(default_factory=set)  # loaded, and probed
    problem: str = "not checked yet"  # why it is out, when it is
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0
    failed_starts: int = 0  # in a row, without being up in between
    last_failure: str = ""  # why it last stopped, shown while it starts again
    next_start_at: float = 0.0
    up_since_start: bool = False

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def gave_up(self) -> bool:
        return self.failed_starts >= MAX_FAILED_STARTS

    def start(self) -> None:
        """(Re)start the server qatune runs for this replica, on a new port and key; one
        that cannot start (too little memory) is down with the reason, as a failed start."""
        assert self.server is not None, "an operator's server is theirs to start"
        self.server.stop()
        self.started_at = time.monotonic()
        self.up_since_start = False
        try:
            self.server.start()
        except CannotStart as exc:
            self.failed(str(exc))
            return
        self.url, self.api_key = self.server.url, self.server.api_key

    def failed(self, why: str) -> None:
        """The server stopped, or never came up: down, with when it starts again."""
        self.failed_starts = 0 if self.up_since_start else self.failed_starts + 1
        self.last_failure = why
        if self.gave_up:
            self.mark_down(
                f"{why}; not started again after {self.failed_starts} failed starts: fix "
                "the cause, then restart qatune"
            )
            return
        wait = 0.0 if self.failed_starts == 0 else FIRST_BACKOFF_S * 2 ** (self.failed_starts - 1)
        self.next_start_at = time.monotonic() + wait
        self.mark_down(f"{why}; starting again in {wait:g} s" if wait else f"{why}; restarting")
        self.up_since_start = False

    def mark_down(self, problem: str) -> None:
        self.healthy = False
        self.problem = problem
        self.adapters.clear()  # when it is back, it may be a new process


def _weight(url: str, adapter: str) -> int:
    digest = hashlib.blake2b(f"{url}\0{adapter}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def route(replicas: list[Replica], adapter: str | None) -> Replica | None:
    """The replica for a request of `adapter` (None: the base model); None if none is up."""
    up = [replica for replica in replicas if replica.healthy]
    if not up:
        return None
    least = min(up, key=lambda replica: replica.in_flight)
    if adapter is None:
        return least
    holders = [replica for replica in up if adapter in replica.adapters]
    home = (
        min(holders, key=lambda replica: replica.in_flight)
        if holders
        else max(up, key=lambda replica: _weight(replica.url, adapter))
    )
    return least if home.in_flight - least.in_flight >= SPILL_OVER else home


async def check(
    client: httpx.AsyncClient, replica: Replica, base_model: str, start_seconds: float
) -> None:
    """Is `replica` up and serving `base_model`? A server qatune started that has exited,
    or is not up `start_seconds` after its start, is started again."""
    server = replica.server
    if server is not None:
        if replica.gave_up:
            return
        now = time.monotonic()
        waited = now - replica.started_at
        if replica.next_start_at:  # down, waiting to start again
            if now < replica.next_start_at:
                return
            replica.next_start_at = 0.0
            logger.warning("{}: starting again ({})", server.name, replica.problem)
            await asyncio.to_thread(replica.start)
            replica.restarts += 1
            return
        if not server.alive or (not replica.healthy and waited > start_seconds):
            why = server.why_stopped() if not server.alive else "too slow to start"
            await asyncio.to_thread(server.stop)
            replica.failed(why)
            logger.warning("{}: {}", server.name, replica.problem)
            return
    try:
        health = await client.get(replica.url + "/health", timeout=5.0)
        if health.status_code != 200:
            replica.mark_down(f"GET /health answered {health.status_code}")
            return
        if not replica.healthy:
            models = await client.get(
                replica.url + "/v1/models", headers=replica.headers, timeout=5.0
            )
            served = sorted(m["id"] for m in models.json().get("data", []))
            if base_model not in served:
                replica.mark_down(f"serves {served}, not {base_model}")
                return
            replica.adapters.clear()  # a server that was down has none of ours
            replica.healthy, replica.problem = True, ""
            replica.up_since_start, replica.failed_starts, replica.last_failure = True, 0, ""
            logger.info("vLLM at {} serves {}", replica.url, base_model)
    except (httpx.HTTPError, ValueError) as exc:
        if replica.healthy or server is None:
            replica.mark_down(f"unreachable: {exc!r}")
        else:  # still starting; after a failure, the failure is what an operator needs
            last = replica.last_failure
            replica.problem = f"starting again after: {last}" if last else "starting"
