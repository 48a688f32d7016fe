"""Connections that send slowly, or too many: what uvicorn leaves open.

uvicorn closes idle keep-alive connections, but waits without limit for a request whose
head or body trickles in (slowloris), and accepts any number of connections, up to the
process's descriptor limit, where it can accept none, /health's included. Here:

- a request's head must arrive within QATUNE_HEADER_TIMEOUT_SECONDS of its first byte (or
  of the connection), each piece of its body within QATUNE_BODY_TIMEOUT_SECONDS of the last
  (else 408, and the connection closes);
- one address holds at most QATUNE_MAX_CONNECTIONS_PER_SOURCE connections at once, and never
  more than half the server's (trusted proxies, which carry many clients, are not capped):
  one more is answered 429;
- the server holds at most QATUNE_MAX_CONNECTIONS (by default half the descriptors the
  process may open, so files, pipes and the database always have room): past it, a band
  of HEALTH_RESERVE more connections serves /health, /ready and /metrics only, so that a
  probe gets through a flood; past that, or for other paths in the band, a 503.
An over-limit connection gets its answer at once and is closed after the client has had
time to read it; it never holds a descriptor for long.
"""

import asyncio
import ipaddress
import json
import resource
from collections import Counter
from dataclasses import dataclass, field

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 33\r\n"
    b"connection: close\r\n\r\nThe request took too long to send"
)


# An idle connection is kept this long for the client's next request. Above the 5 s after
# which httpx (and with it the official openai client) drops one itself: with equal
# timeouts, a request sent on a connection as the server closes it fails with a reset.
KEEP_ALIVE_SECONDS = 20
HEALTH_RESERVE = 32  # connections past the cap that may still ask for /health and /ready
HEALTH_PATHS = (b"/health", b"/ready", b"/metrics")
BAND_HEAD_SECONDS = 1.0  # a probe sends its request at once: idlers leave the band soon
LINGER_SECONDS = 2.0  # an over-limit answer's connection stays open this long to be read
# ...while at most a quarter of the held connections' worth linger (64 at the least): past
# it, closed at once after the answer, and a client whose request was not yet read then
# sees a reset, not the answer. A script's burst of requests from one address lingers.
LINGER_SHARE, LINGER_AT_LEAST = 4, 64

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def refusal(status: int, message: str, retry_after: int) -> bytes:
    reason = {429: "Too Many Requests", 503: "Service Unavailable"}[status]
    body = json.dumps({"detail": message, "errors": []}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: {retry_after}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


TOO_MANY_FROM_YOU = refusal(
    429,
    "Too many connections from your address at once; close some, or retry in a second",
    1,
)
FULL = refusal(503, "The server has as many connections as it takes at once; retry in a second", 1)


def descriptor_limit() -> int:
    """The process's open-file limit, raised to its hard limit (at most 65,536) first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard if hard != resource.RLIM_INFINITY else 65536, 65536)
    if soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


@dataclass(frozen=True)
class ConnectionRules:
    header_timeout_s: float
    body_timeout_s: float
    per_source: int  # 0: no cap
    uncapped: str = ""  # addresses or CIDR ranges, comma-separated: the trusted proxies
    max_connections: int = 0  # the general cap; 0: half the descriptor limit
    _networks: tuple[Network, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:  # parsed once, not on every connection
        names = [name.strip() for name in self.uncapped.split(",") if name.strip()]
        networks = tuple(ipaddress.ip_network(name, strict=False) for name in names)
        object.__setattr__(self, "_networks", networks)
        if not self.max_connections:
            object.__setattr__(self, "max_connections", max(64, descriptor_limit() // 2))
        if self.per_source:  # one address never holds more than half of what the server may
            object.__setattr__(self, "per_source", min(self.per_source, self.max_connections // 2))

    @property
    def linger_at_most(self) -> int:
        """Refused connections left open to be read, at most."""
        return max(LINGER_AT_LEAST, self.max_connections // LINGER_SHARE)

    def capped(self, host: str) -> bool:
        if not self.per_source:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return True
        return not any(address in network for network in self._networks)


def guarded_protocol(rules: ConnectionRules) -> type[HttpToolsProtocol]:
    """uvicorn's HTTP protocol, with the rules above (one count of connections per server)."""
    open_from: Counter[str] = Counter()
    counts = {"open": 0, "lingering": 0}

    class GuardedProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _counted: str | None = None
        _in_total = False
        _health_only = False  # a connection in the band past the cap
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            host = self.client[0] if self.client else ""
            if counts["open"] >= rules.max_connections + HEALTH_RESERVE:
                self._refuse(FULL)
                return
            if rules.capped(host):
                if open_from[host] >= rules.per_source:
                    self._refuse(TOO_MANY_FROM_YOU)
                    return
                open_from[host] += 1
                self._counted = host
            counts["open"] += 1
            self._in_total = True
            self._health_only = counts["open"] > rules.max_connections
            self._allow(BAND_HEAD_SECONDS if self._health_only else rules.header_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            self._allow(None)
            self._release()
            if self._refused:
                counts["lingering"] -= 1
            super().connection_lost(exc)

        def _release(self) -> None:
            """This connection no longer counts against the caps."""
            if self._counted is not None:
                open_from[self._counted] -= 1
                if not open_from[self._counted]:
                    del open_from[self._counted]
                self._counted = None
            if self._in_total:
                counts["open"] -= 1
                self._in_total = False

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return  # read and dropped, so that closing sends no reset over the answer
            if self._health_only and not _asks_for_health(data):
                self._refuse(FULL)
                return
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._health_only:  # the band is for one probe at a time
                self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._allow(rules.header_timeout_s)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._allow(rules.body_timeout_s)

        def on_body(self, body: bytes) -> None:
            super().on_body(body)
            self._allow(rules.body_timeout_s)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._allow(None)  # read whole: the response may take as long as it takes

        def _refuse(self, answer: bytes) -> None:
            """Answer now; close once the client has had time to read it."""
            self._allow(None)
            self._release()  # lingering is counted on its own, and bounded
            self._refused = True
            counts["lingering"] += 1
            self.transport.write(answer)
            if counts["lingering"] > rules.linger_at_most or not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)

        def _allow(self, seconds: float | None) -> None:
            """Close the connection unless more of the request arrives within `seconds`."""
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = None if seconds is None else self.loop.call_later(seconds, self._late)

        def _late(self) -> None:
            if self.transport.is_closing():
                return
            answering = self.cycle is not None and (
                self.cycle.response_started and not self.cycle.response_complete
            )
            if not answering:
                self.transport.write(TIMED_OUT)
            self.transport.close()

    return GuardedProtocol


def _asks_for_health(data: bytes) -> bool:
    """Whether a request's first bytes ask for a health, readiness or metrics path."""
    line = data.split(b"\r\n", 1)[0].split(b" ")
    return len(line) >= 2 and line[1].split(b"?", 1)[0] in HEALTH_PATHS
