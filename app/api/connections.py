"""Connections that send slowly, or too many from one place: what uvicorn leaves open.

uvicorn closes idle keep-alive connections, but waits without limit for a request whose
head or body trickles in (slowloris), and accepts any number of connections from one
address, up to the process's descriptor limit, where it can accept none, /health's
included. Here a request's head must arrive within QATUNE_HEADER_TIMEOUT_SECONDS of its
first byte (or of the connection), each piece of its body within
QATUNE_BODY_TIMEOUT_SECONDS of the last (else 408, and the connection closes), and one
address holds at most QATUNE_MAX_CONNECTIONS_PER_SOURCE connections at once (more are
closed as they come; trusted proxies, which carry many clients, are not capped).
"""

import asyncio
import ipaddress
from collections import Counter
from dataclasses import dataclass, field

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 33\r\n"
    b"connection: close\r\n\r\nThe request took too long to send"
)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ConnectionRules:
    header_timeout_s: float
    body_timeout_s: float
    per_source: int  # 0: no cap
    uncapped: str = ""  # addresses or CIDR ranges, comma-separated: the trusted proxies
    _networks: tuple[Network, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:  # parsed once, not on every connection
        names = [name.strip() for name in self.uncapped.split(",") if name.strip()]
        networks = tuple(ipaddress.ip_network(name, strict=False) for name in names)
        object.__setattr__(self, "_networks", networks)

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

    class GuardedProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _counted: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            host = self.client[0] if self.client else ""
            if rules.capped(host):
                if open_from[host] >= rules.per_source:
                    transport.abort()  # at once: it holds no descriptor past this call
                    return
                open_from[host] += 1
                self._counted = host
            self._allow(rules.header_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            self._allow(None)
            if self._counted is not None:
                open_from[self._counted] -= 1
                if not open_from[self._counted]:
                    del open_from[self._counted]
                self._counted = None
            super().connection_lost(exc)

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
