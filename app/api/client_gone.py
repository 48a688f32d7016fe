"""Work done for a request, stopped when its client goes away: nobody would read the answer."""

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import Request

T = TypeVar("T")
LOOK_EVERY_SECONDS = 0.5


async def unless_client_leaves(request: Request, work: Coroutine[Any, Any, T]) -> T | None:
    """`work`'s result, or None once the client has disconnected (the work is cancelled)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=LOOK_EVERY_SECONDS)
            if done:
                return task.result()
            if await request.is_disconnected():
                return None
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
