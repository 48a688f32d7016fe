"""Every HTTP request's latency, by route template (`/jobs/{job_id:int}`, never the raw
path: one series per route, whatever ids or junk clients send), into GET /metrics."""

import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

Observe = Callable[[str, str, int, float], None]  # method, route, status, seconds


class RequestTimer:
    def __init__(self, app: ASGIApp, *, observe: Observe) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Routing has run by now: the scope names the matched route, if any.
                route = getattr(scope.get("route"), "path", None) or "unmatched"
                seconds = time.perf_counter() - started
                self.observe(scope["method"], route, int(message["status"]), seconds)
            await send(message)

        await self.app(scope, receive, timed_send)
