"""The REST API (FastAPI): the cluster-wide views, the scheduler's inputs, operators' actions.

Every error is a JSON body ``{"error": "...", "fields": [...]}``
(``provisioner.api.errors``). The routes are plain functions, a module per
part (``provisioner.api.routes``); what they act on is the app's state, given
to them as dependencies (``provisioner.api.access``): the caller by role, the
``Operations``, and the operator's surface as the caller
(``provisioner.surface.local``), the same the CLI's direct path asks.

(No ``from __future__ import annotations`` in the API's modules: FastAPI
reads the handlers' annotations at runtime.)
"""

from typing import Any, Callable

from fastapi import Depends, FastAPI

from provisioner.api.access import known_query
from provisioner.api.auth import Tokens
from provisioner.api.bodylimit import DEFAULT as MAX_BODY
from provisioner.api.bodylimit import BodyLimit
from provisioner.api.errors import add_handlers
from provisioner.api.jsonbodies import JsonBodies
from provisioner.api.routes import actions, audit, health, inputs, views
from provisioner.metrics.collector import Metrics
from provisioner.surface.operations import Operations


def create_app(ops: Operations, tokens: Tokens | None, metrics: Metrics | None = None,
               ready: Callable[[], str | None] = lambda: None, max_body: int = MAX_BODY,
               reload: Callable[[], dict[str, Any]] | None = None) -> FastAPI:
    """The app; ``tokens`` None serves read-only views to anyone (only ever bound to loopback).

    ``max_body``: request bodies are cut off past this many bytes (413), as they arrive and
    before the token is checked (``provisioner.api.bodylimit``).
    ``reload``: reads the daemon's config file again (``Daemon.reload``), for ``POST /v1/reload``.
    """
    app = FastAPI(title="provisioner", version="1",
                  description="Providers, requests, instances, resources, costs, decisions, orphans and demand "
                              "of a provisioner cluster; the scheduler's inputs; operators' actions.",
                  docs_url=None, redoc_url=None, dependencies=[Depends(known_query)])
    app.state.ops, app.state.tokens, app.state.metrics = ops, tokens, metrics
    app.state.ready, app.state.reload = ready, reload
    app.add_middleware(JsonBodies)
    app.add_middleware(BodyLimit, limit=max_body)
    add_handlers(app)
    for part in (health, views, inputs, actions, audit):
        app.include_router(part.router)
    _plain_query_parameters(app)
    return app


def _plain_query_parameters(app: FastAPI) -> None:
    """Publish optional query parameters as plain strings and numbers, not "or null".

    A query string has no null: an absent parameter is what ``required: false``
    already says. Left as ``anyOf [string, null]`` the document would promise that
    a value of any other JSON type is refused, and in a URL every value is text.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = build()
            for path in doc.get("paths", {}).values():
                for op in path.values():
                    for param in op.get("parameters", []):
                        schema = param.get("schema", {})
                        kinds = schema.get("anyOf", [])
                        if param.get("in") == "query" and len(kinds) == 2 and {"type": "null"} in kinds:
                            plain = next(k for k in kinds if k != {"type": "null"})
                            param["schema"] = {**{k: v for k, v in schema.items() if k != "anyOf"}, **plain}
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
