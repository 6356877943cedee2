"""The API's error bodies: ``{"error": "...", "fields": [...]}`` for every refusal, each exception to its status.

401 without a known token, 403 for a role that may not do it, 404 for an
unknown name, 409 for an action that does not apply now, 413 for an input
over a limit, 422 naming the field of a bad body or parameter, 503 when the
controller (or the audit log) cannot be read or a fact was not recorded. An
unexpected failure is logged and answered 500 without detail.
"""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from config.located import dotted, shown
from config.located import in_words as located_words
from messages.errors import ControllerUnavailable
from provisioner.api.models import Error
from provisioner.audit.log import AuditError
from provisioner.read.views import BadCursor
from provisioner.surface.bulk import NoFilter
from provisioner.surface.operations import BadFilter, CommitFailed, Conflict, NotFound, TooLarge

log = logging.getLogger(__name__)

#: An OpenAPI ``responses`` entry: the answers a route documents besides its own.
Responses = dict[int | str, dict[str, Any]]

#: The answers of every route that needs a token; of one that names a thing; of an action.
AUTH: Responses = {401: {"model": Error, "description": "no token, or an unknown one"},
                   403: {"model": Error, "description": "the token's role may not do this"},
                   422: {"model": Error, "description": "a bad parameter or body; `fields` names it"},
                   503: {"model": Error, "description": "the controller cannot be reached"}}
FOUND: Responses = {404: {"model": Error, "description": "no such thing"}}
ACTION: Responses = {**AUTH, **FOUND, 409: {"model": Error, "description": "the action does not apply to it now"}}


class ApiError(Exception):
    def __init__(self, status: int, message: str, fields: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = fields or []


def error(status: int, message: str, fields: list[dict[str, str]] | None = None,
          headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "fields": fields or []}, status_code=status, headers=headers)


def _field(e: dict[str, Any]) -> dict[str, str]:
    """One validation error of a parameter as ``{field, message}``; the input itself is not echoed."""
    loc = [str(x) for x in e.get("loc", ())]
    if e.get("type") == "json_invalid":
        at = f" at character {loc[1]}" if len(loc) > 1 else ""
        return {"field": "body", "message": f"not valid JSON{at}: {e.get('ctx', {}).get('error', 'malformed')}"}
    return {"field": ".".join(loc), "message": str(e.get("msg", ""))}


def _body_model(request: Request) -> Any:
    """The model of the route's body, when it takes one as a whole (None: the messages are a little plainer)."""
    route = request.scope.get("route")
    params = getattr(getattr(route, "dependant", None), "body_params", None) or []
    if len(params) != 1 or getattr(route, "_embed_body_fields", False):
        return None
    return getattr(params[0].field_info, "annotation", None)


def _in_words(request: Request, exc: RequestValidationError) -> tuple[str, list[dict[str, str]]]:
    """The errors as the 422's ``error`` line and its ``fields``.

    A body's errors are said as the CLI says a file's (``config.located``): ``field`` is the plain JSON path
    (``body.items[0].count``, no union tags), ``message`` the problem in words with the value given, and the
    line names the list entry by its id: ``body.items[0] (id 'gpu').count: must be at least 0, got -1``.
    """
    def in_body(e: Any) -> bool:
        return tuple(e.get("loc", ()))[:1] == ("body",) and e.get("type") != "json_invalid"

    errors = exc.errors()
    fields, lines = [], []
    for e in errors:
        if not in_body(e):
            f = _field(e)
            fields.append(f)
            lines.append(f"{f['field']}: {f['message']}")
    body = [dict(e, loc=tuple(e["loc"])[1:]) for e in errors if in_body(e)]
    if body:
        for elems, place, message in located_words(body, exc.body, _body_model(request), reword=_reword):
            fields.append({"field": "body" + _tail(dotted(elems)), "message": message})
            lines.append(f"body{_tail(place)}: {message}")
    if not lines:
        return "request: invalid", []
    more = f" ({len(lines) - 1} more)" if len(lines) > 1 else ""
    return lines[0] + more, fields


def _reword(kind: str, elems: tuple[Any, ...], value: Any) -> str | None:
    """A reason's pattern in words, as the CLI says it of ``--reason``."""
    if kind == "string_pattern_mismatch" and elems[-1:] == ("reason",):
        return f"not valid: {shown(value)} (one line of text, no control characters)"
    return None


def _tail(path: str) -> str:
    return path if not path or path.startswith("[") else "." + path


# --- the handlers, each an exception to its answer --------------------------------------------


async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return error(exc.status, exc.message, exc.fields, headers)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    message, fields = _in_words(request, exc)
    return error(422, message, fields)


async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400:  # FastAPI could not even decode the body (not UTF-8, say)
        return error(422, "body: cannot be read as JSON", [{"field": "body", "message": str(exc.detail)}])
    return error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))


async def _no_filter(_: Request, exc: NoFilter) -> JSONResponse:
    return error(422, f"body: {exc}", [{"field": "body", "message": str(exc)}])


async def _bad_filter(_: Request, exc: BadFilter) -> JSONResponse:
    return error(422, f"query.{exc.field}: {exc}", [{"field": f"query.{exc.field}", "message": str(exc)}])


async def _cursor(_: Request, exc: BadCursor) -> JSONResponse:
    return error(422, str(exc), [{"field": "query.after", "message": str(exc).partition(": ")[2]}])


async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
    return error(404, str(exc))


async def _conflict(_: Request, exc: Conflict) -> JSONResponse:
    return error(409, str(exc))


async def _too_large(_: Request, exc: TooLarge) -> JSONResponse:
    return error(413, str(exc))


async def _not_committed(_: Request, exc: CommitFailed) -> JSONResponse:
    return error(503, f"not recorded: {exc}")


async def _unavailable(_: Request, exc: ControllerUnavailable) -> JSONResponse:
    log.error("api: controller unavailable: %s", exc)
    return error(503, "the controller cannot be reached; try again")


async def _audit_broken(_: Request, exc: AuditError) -> JSONResponse:
    log.error("api: audit log: %s", exc)
    return error(503, f"the audit log cannot be read: {exc}")


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("api: unexpected error")
    return error(500, "internal error (logged by the daemon)")


HANDLERS: list[tuple[type[Exception], Any]] = [
    (ApiError, _api_error), (RequestValidationError, _invalid), (StarletteHTTPException, _http),
    (NoFilter, _no_filter), (BadFilter, _bad_filter), (BadCursor, _cursor), (NotFound, _not_found),
    (Conflict, _conflict), (TooLarge, _too_large), (CommitFailed, _not_committed),
    (ControllerUnavailable, _unavailable), (AuditError, _audit_broken), (Exception, _unexpected),
]


def add_handlers(app: FastAPI) -> None:
    for kind, handler in HANDLERS:
        app.add_exception_handler(kind, handler)
