"""Every body the API takes is JSON, whatever ``Content-Type`` the client sent.

``curl -d '{"reason": "AZ maintenance"}'`` sends the body as
``application/x-www-form-urlencoded``; FastAPI then hands the raw bytes to
the body model and answers 422 "Input should be a valid dictionary", which
tells an operator nothing. This API takes nothing but JSON, so a body sent
under another type (or none) is read as JSON: valid JSON is accepted, and
anything else is the usual 422 naming ``body`` as not valid JSON.
"""

from __future__ import annotations

from typing import Any

Scope = dict[str, Any]


def _is_json(content_type: bytes) -> bool:
    kind = content_type.split(b";", 1)[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))


class JsonBodies:
    """ASGI middleware: a request with a body that does not say JSON is read as JSON."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            headers = scope["headers"]
            given = next((v for k, v in headers if k == b"content-type"), b"")
            if not _is_json(given):
                scope = dict(scope, headers=[(k, v) for k, v in headers if k != b"content-type"]
                             + [(b"content-type", b"application/json")])
        await self.app(scope, receive, send)
