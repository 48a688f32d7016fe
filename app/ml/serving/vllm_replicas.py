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

from app.ml.serving.vllm_servers import ManagedServer

# Spill over when the replica that holds an adapter has this many requests in flight more
# than the least busy one: below that, loading the adapter a second time costs more than
# the wait (vLLM batches the requests anyway).
SPILL_OVER = 8


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

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def start(self) -> None:
        """(Re)start the server qatune runs for this replica, on a new port and key."""
        assert self.server is not None, "an operator's server is theirs to start"
        self.server.stop()
        self.server.start()
        self.url, self.api_key = self.server.url, self.server.api_key
        self.started_at = time.monotonic()

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
        waited = time.monotonic() - replica.started_at
        if not server.alive or (not replica.healthy and waited > start_seconds):
            why = f"exited ({server.exit_code})" if not server.alive else "too slow to start"
            replica.mark_down(f"{why}; restarting")
            logger.warning("{} {}: restarting it", server.name, why)
            await asyncio.to_thread(replica.start)
            replica.restarts += 1
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
            logger.info("vLLM at {} serves {}", replica.url, base_model)
    except (httpx.HTTPError, ValueError) as exc:
        if replica.healthy or server is None:
            replica.mark_down(f"unreachable: {exc!r}")
        else:
            replica.problem = "starting"
