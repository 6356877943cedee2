"""A bound on request bodies, enforced while they arrive and before anything else reads them.

FastAPI reads a handler's whole body before it solves the handler's
dependencies, the bearer token among them: without a bound, anyone who can
reach the port makes the daemon hold whatever they send (a 400 MiB
``PUT /v1/demand`` answered 401 once read). This ASGI middleware, the
outermost layer of the app, answers **413** at once when a request declares
a ``Content-Length`` over the limit, without reading a byte of the body,
and counts a body sent without one (chunked) as it streams, answering 413
as soon as the count passes the limit; what was read so far is dropped with
the request. The server then closes the connection, so the rest is never
read either.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import orjson
from starlette.exceptions import HTTPException

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT = 32 * 1024 * 1024


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a streamed body passes the limit.

    An ``HTTPException``, so a framework reading the body passes it on as it is
    (FastAPI turns other errors met while reading into a 400) and the app
    answers it as its other errors, with status 413.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, _message(limit))


class BodyLimit:
    def __init__(self, app: App, limit: int = DEFAULT) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, send, f"declares {declared} bytes")
            return
        started = False
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    _said(scope, f"sent more than {self.limit} bytes", self.limit)
                    raise BodyTooLarge(self.limit)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, send, None)

    async def _refuse(self, scope: Scope, send: Send, what: str | None) -> None:
        if what is not None:
            _said(scope, what, self.limit)
        body = orjson.dumps({"error": _message(self.limit),
                             "fields": [{"field": "body", "message": f"more than {self.limit} bytes"}]})
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _message(limit: int) -> str:
    return f"request body too large: at most {limit} bytes (api.max_body)"


def _said(scope: Scope, what: str, limit: int) -> None:
    client = scope.get("client") or ("?", 0)
    log.warning("api: %s %s from %s refused: the body %s, the limit is %d bytes (api.max_body)",
                scope.get("method"), scope.get("path"), client[0], what, limit)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
