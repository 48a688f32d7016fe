"""Each request answered in the language its `Accept-Language` prefers (app/core/language.py):
set for everything the request runs, its error handlers and worker threads included, and
named back in `Content-Language`."""

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.language import CONTENT_LANGUAGE, negotiate, reset_language, use_language


class RequestLanguage:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        language = negotiate(Headers(scope=scope).get("accept-language", ""))

        async def named_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Language", CONTENT_LANGUAGE[language])
                headers.add_vary_header("Accept-Language")
            await send(message)

        token = use_language(language)
        try:
            await self.app(scope, receive, named_send)
        finally:
            reset_language(token)
