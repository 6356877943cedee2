"""The REST API (FastAPI): the cluster-wide views, the scheduler's inputs, operators' actions.

Every error is a JSON body ``{"error": "...", "fields": [...]}``: 401 without
a known token, 403 for a role that may not do it, 404 for an unknown name,
409 for an action that does not apply now, 422 naming the field of a bad
body or parameter, 503 when the controller cannot be reached. An unexpected
failure is logged and answered 500 without detail; none is expected.

(No ``from __future__ import annotations`` here: FastAPI reads the handlers'
annotations at runtime, and the role dependencies are local to the app.)
"""

import logging
from typing import Annotated, Any, Callable

from fastapi import Body, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from config.located import dotted, shown
from config.located import in_words as located_words
from messages.demand import DemandSnapshot, SupplySnapshot
from messages.errors import ControllerUnavailable
from provisioner.api.auth import OPERATE, READ, SCHEDULE, Caller, Tokens
from provisioner.api.bodylimit import DEFAULT as MAX_BODY
from provisioner.api.bodylimit import BodyLimit
from provisioner.api.jsonbodies import JsonBodies
from provisioner.api.models import (
    ActionBody,
    ActionResult,
    AuditPage,
    AuditVerified,
    BulkResult,
    CostRow,
    DaemonRow,
    DecisionRow,
    DemandStored,
    Error,
    Health,
    HostEventBody,
    HostEventOut,
    InstanceRow,
    Liveness,
    OrphanRow,
    Page,
    ProviderDetail,
    Reloaded,
    RequestRow,
    ResourceRow,
)
from provisioner.audit.log import AuditError
from provisioner.metrics.collector import Metrics
from provisioner.read.views import BadCursor
from provisioner.surface.bulk import Bulk, BulkBody, BulkFilter, NoFilter
from provisioner.surface.operations import BadFilter, CommitFailed, Conflict, NotFound, Operations, TooLarge
from provisioner.surface.protocol import Steer
from provisioner.version import version

log = logging.getLogger(__name__)

HOST_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$"
Limit = Annotated[int, Query(ge=1, le=10_000, description="At most this many rows")]
After = Annotated[str | None, Query(max_length=300, description="The `next` of the previous page")]
Filter = Annotated[str | None, Query(max_length=200)]

_AUTH = {401: {"model": Error, "description": "no token, or an unknown one"},
         403: {"model": Error, "description": "the token's role may not do this"},
         422: {"model": Error, "description": "a bad parameter or body; `fields` names it"},
         503: {"model": Error, "description": "the controller cannot be reached"}}
_FOUND = {404: {"model": Error, "description": "no such thing"}}
_ACTION = {**_AUTH, **_FOUND, 409: {"model": Error, "description": "the action does not apply to it now"}}


class ApiError(Exception):
    def __init__(self, status: int, message: str, fields: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = fields or []


def _error(status: int, message: str, fields: list[dict[str, str]] | None = None,
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


def _query_names(dependant: Any) -> set[str]:
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _known_query(request: Request) -> None:
    """Refuse query parameters a route does not take, or repeated: a misspelt filter must not list everything."""
    route = request.scope.get("route")
    known = _query_names(route.dependant) if route is not None else set()
    unknown = sorted(k for k in request.query_params if k not in known)
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise ApiError(422, f"query.{unknown[0]}: unknown parameter (this takes: {takes})",
                       [{"field": f"query.{k}", "message": "unknown parameter"} for k in unknown])
    twice = sorted({k for k in request.query_params if len(request.query_params.getlist(k)) > 1})
    if twice:
        raise ApiError(422, f"query.{twice[0]}: given more than once",
                       [{"field": f"query.{k}", "message": "given more than once"} for k in twice])


def create_app(ops: Operations, tokens: Tokens | None, metrics: Metrics | None = None,
               ready: Callable[[], str | None] = lambda: None, max_body: int = MAX_BODY,
               reload: Callable[[], dict[str, Any]] | None = None) -> FastAPI:
    """The app; ``tokens`` None serves read-only views to anyone (only ever bound to loopback).

    ``max_body``: request bodies are cut off past this many bytes (413), as they arrive and
    before the token is checked (``provisioner.bodylimit``).
    ``reload``: reads the daemon's config file again (``Daemon.reload``), for ``POST /v1/reload``.
    """
    app = FastAPI(title="provisioner", version="1",
                  description="Providers, requests, instances, resources, costs, decisions, orphans and demand "
                              "of a provisioner cluster; the scheduler's inputs; operators' actions.",
                  docs_url=None, redoc_url=None, dependencies=[Depends(_known_query)])
    app.add_middleware(JsonBodies)
    app.add_middleware(BodyLimit, limit=max_body)
    bearer = HTTPBearer(auto_error=False, description="A token from the daemon's tokens file (api.tokens)")

    def access(allowed: frozenset[str], what: str) -> Callable[..., Caller]:
        needs = " or ".join(sorted(allowed))

        def check(cred: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Caller:
            if tokens is None:
                if allowed is READ:
                    return Caller(name="anonymous", role="viewer")
                raise ApiError(403, f"{what} needs a token with role {needs}, and this daemon has no tokens "
                                    "configured (api.tokens): it serves read-only views")
            if cred is None or not cred.credentials:
                raise ApiError(401, "missing bearer token: send 'Authorization: Bearer <token>'")
            caller = tokens.caller(cred.credentials)
            if caller is None:
                raise ApiError(401, "unknown token")
            if caller.role not in allowed:
                raise ApiError(403, f"role {caller.role} ({caller.name}) may not {what}: it needs role {needs}")
            return caller

        return check

    Reader = Annotated[Caller, Depends(access(READ, "read"))]
    Operator = Annotated[Caller, Depends(access(OPERATE, "steer providers or return supply"))]
    Scheduler = Annotated[Caller, Depends(access(SCHEDULE, "feed demand or host events"))]
    Reason = Annotated[ActionBody | None, Body()]

    # --- errors ------------------------------------------------------------------------

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _error(exc.status, exc.message, exc.fields, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, fields = _in_words(request, exc)
        return _error(422, message, fields)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not even decode the body (not UTF-8, say)
            return _error(422, "body: cannot be read as JSON", [{"field": "body", "message": str(exc.detail)}])
        return _error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(NoFilter)
    async def _no_filter(_: Request, exc: NoFilter) -> JSONResponse:
        return _error(422, f"body: {exc}", [{"field": "body", "message": str(exc)}])

    @app.exception_handler(BadFilter)
    async def _bad_filter(_: Request, exc: BadFilter) -> JSONResponse:
        return _error(422, f"query.{exc.field}: {exc}", [{"field": f"query.{exc.field}", "message": str(exc)}])

    @app.exception_handler(BadCursor)
    async def _cursor(_: Request, exc: BadCursor) -> JSONResponse:
        return _error(422, str(exc), [{"field": "query.after", "message": str(exc).partition(": ")[2]}])

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(Conflict)
    async def _conflict(_: Request, exc: Conflict) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(TooLarge)
    async def _too_large(_: Request, exc: TooLarge) -> JSONResponse:
        return _error(413, str(exc))

    @app.exception_handler(CommitFailed)
    async def _not_committed(_: Request, exc: CommitFailed) -> JSONResponse:
        return _error(503, f"not recorded: {exc}")

    @app.exception_handler(ControllerUnavailable)
    async def _unavailable(_: Request, exc: ControllerUnavailable) -> JSONResponse:
        log.error("api: controller unavailable: %s", exc)
        return _error(503, "the controller cannot be reached; try again")

    @app.exception_handler(AuditError)
    async def _audit_broken(_: Request, exc: AuditError) -> JSONResponse:
        log.error("api: audit log: %s", exc)
        return _error(503, f"the audit log cannot be read: {exc}")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("api: unexpected error")
        return _error(500, "internal error (logged by the daemon)")

    # --- health and metrics -------------------------------------------------------------

    @app.get("/healthz", response_model=Liveness, tags=["health"])
    def healthz() -> dict[str, Any]:
        """The process answers; with its version."""
        return {"status": "ok", "version": version()}

    @app.get("/readyz", response_model=Health, tags=["health"], responses={503: {"model": Error}})
    def readyz() -> Any:
        """The daemon has started and can read the controller."""
        why = ready()
        if why is not None:
            return _error(503, f"not ready: {why}")
        ops.read_model.refresh()
        return {"status": "ready", "seq": ops.read_model.seq}

    @app.get("/metrics", tags=["health"], response_class=Response,
             responses={**_AUTH, 200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
    def prometheus(_: Reader) -> Response:
        if metrics is None:
            raise ApiError(404, "metrics are not served by this daemon")
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    # --- views ----------------------------------------------------------------------------

    def listing(view: str, after: str | None, limit: int, **where: Any) -> dict[str, Any]:
        items, nxt = ops.list(view, where=where, after=after, limit=limit)
        return {"items": items, "next": nxt}

    @app.get("/v1/providers", response_model=Page[ProviderDetail], responses=_AUTH, tags=["views"])
    def providers(_: Reader, kind: Filter = None, status: Filter = None, owner: Filter = None,
                  after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        """Providers with their description, usage and lease owner."""
        return listing("providers", after, limit, kind=kind, status=status, owner=owner)

    @app.get("/v1/providers/{name}", response_model=ProviderDetail, responses={**_AUTH, **_FOUND}, tags=["views"])
    def provider(_: Reader, name: Annotated[str, Path(max_length=200)]) -> dict[str, Any]:
        return ops.provider(name)

    @app.get("/v1/requests", response_model=Page[RequestRow], responses=_AUTH, tags=["views"])
    def requests(_: Reader, provider: Filter = None, state: Filter = None, action: Filter = None,
                 kind: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        return listing("requests", after, limit, provider=provider, state=state, action=action, kind=kind)

    @app.get("/v1/instances", response_model=Page[InstanceRow], responses=_AUTH, tags=["views"])
    def instances(_: Reader, provider: Filter = None, state: Filter = None, template: Filter = None,
                  after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        return listing("instances", after, limit, provider=provider, state=state, template=template)

    @app.get("/v1/resources", response_model=Page[ResourceRow], responses=_AUTH, tags=["views"])
    def resources(_: Reader, provider: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        return listing("resources", after, limit, provider=provider)

    @app.get("/v1/costs", response_model=Page[CostRow], responses=_AUTH, tags=["views"])
    def costs(_: Reader, provider: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        return listing("costs", after, limit, provider=provider)

    @app.get("/v1/decisions", response_model=Page[DecisionRow], responses=_AUTH, tags=["views"])
    def decisions(_: Reader, item: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        """The planner's recent decisions, oldest first; ``after`` is a decision's seq."""
        return listing("decisions", after, limit, item=item)

    @app.get("/v1/orphans", response_model=Page[OrphanRow], responses=_AUTH, tags=["views"])
    def orphans(_: Reader, provider: Filter = None, kind: Filter = None, state: Filter = None,
                after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        """Orphaned hosts and grants, and requests whose outcome stayed unknown."""
        return listing("orphans", after, limit, provider=provider, kind=kind, state=state)

    @app.get("/v1/daemons", response_model=Page[DaemonRow], responses=_AUTH, tags=["views"])
    def daemons(_: Reader, state: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
        """Each daemon instance sharing the controller: alive and holding roles (active), alive holding none
        (standby), gone without letting go (lapsed), or stopped; since when, and the roles it holds."""
        return listing("daemons", after, limit, state=state)

    @app.get("/v1/demand", response_model=DemandSnapshot | None, responses=_AUTH, tags=["demand"])
    def demand(_: Reader) -> Any:
        """The current demand snapshot; null before the first."""
        return ops.demand()

    # --- the scheduler's inputs -------------------------------------------------------------

    @app.put("/v1/demand", response_model=DemandStored, responses=_AUTH, tags=["demand"])
    def put_demand(caller: Scheduler, snapshot: DemandSnapshot) -> dict[str, Any]:
        """Replace the demand; the controller assigns ``seq`` and ``time``. ``warnings`` names items no
        configured provider can ever serve (stored all the same)."""
        stored = ops.put_demand(snapshot)
        log.info("api: %s put demand %d (%d items)", caller.name, stored.seq, len(stored.items))
        warnings = ops.demand_warnings(stored)
        for line in warnings:
            log.warning("api: demand %d from %s: %s", stored.seq, caller.name, line)
        return {**stored.to_dict(), "warnings": warnings}

    # A name with a line break matches no route at all (the path pattern stops at it): 404.
    @app.post("/v1/hosts/{name:path}/events", response_model=HostEventOut, tags=["demand"],
              responses={**_AUTH, 404: {"model": Error, "description": "no live host has that name"},
                         409: {"model": Error, "description": "the name is live at several providers: name one"}})
    def host_event(caller: Scheduler, name: Annotated[str, Path(max_length=200, pattern=HOST_NAME)],
                   body: HostEventBody) -> dict[str, Any]:
        """A host joined the cluster, went idle or became busy (``name`` as the provider reported it).

        ``provider`` in the body names whose host it is; without it, the name must be live at one provider.
        """
        return ops.host_event(name, body.event, body.provider)

    @app.get("/v1/supply", response_model=SupplySnapshot | None, responses=_AUTH, tags=["demand"])
    def supply(_: Reader) -> Any:
        """The scheduler's current view of its hosts; null before the first."""
        return ops.supply()

    @app.put("/v1/supply", response_model=SupplySnapshot, responses=_AUTH, tags=["demand"])
    def put_supply(caller: Scheduler, view: SupplySnapshot) -> SupplySnapshot:
        """Replace the scheduler's view of its hosts (idle or busy); it corrects host events that were lost."""
        stored = ops.put_supply(view)
        log.info("api: %s put supply view %d (%d hosts)", caller.name, stored.seq, len(stored.hosts))
        return stored

    # --- operators' actions -----------------------------------------------------------------

    def steer(action: Steer) -> Callable[..., dict[str, Any]]:
        def run(caller: Operator, name: Annotated[str, Path(max_length=200)], body: Reason = None) -> dict[str, Any]:
            result = ops.steer(name, action, body.reason if body else "", caller.name)
            log.info("api: %s: %s", caller.name, result["message"])
            return result

        run.__doc__ = f"Ask the owner of a provider to {action} it (recorded as a fact)."
        return run

    for action in ("pause", "resume", "drain"):
        app.post(f"/v1/providers/{{name}}/{action}", response_model=ActionResult, status_code=202,
                 responses=_ACTION, tags=["actions"], name=f"{action}_provider")(steer(action))  # type: ignore[arg-type]

    def bulk(action: Bulk) -> Callable[..., dict[str, Any]]:
        def run(caller: Operator, body: BulkBody) -> dict[str, Any]:
            f = BulkFilter.model_validate(body.model_dump(include=set(BulkFilter.model_fields)))
            result = ops.bulk(action, f, body.reason, caller.name, dry_run=body.dry_run)
            log.info("api: %s: %s", caller.name, result["message"])
            return result

        run.__doc__ = (f"{action.capitalize()} every host the filters match (all of them at once): `state`, "
                       "`provider`, `older_than` (a duration), `name` (a glob), or `all`; `dry_run` writes nothing. "
                       + ("Busy hosts go back at once." if action == "return" else
                          "Each host goes back once it is not busy."))
        return run

    for action in ("return", "drain"):
        app.post(f"/v1/instances/{action}", response_model=BulkResult, status_code=202, responses=_ACTION,
                 tags=["actions"], name=f"{action}_instances")(bulk(action))  # type: ignore[arg-type]

    @app.post("/v1/instances/{instance_id:path}/return", response_model=ActionResult, status_code=202,
              responses=_ACTION, tags=["actions"])
    def return_instance(caller: Operator, instance_id: Annotated[str, Path(max_length=300)],
                        body: Reason = None) -> dict[str, Any]:
        """Give a host back: ``PROVIDER/MACHINE_ID``, a machine id or a host name."""
        result = ops.return_instance(instance_id, body.reason if body else "", caller.name)
        log.info("api: %s: %s", caller.name, result["message"])
        return result

    @app.post("/v1/orphans/{orphan_id:path}/return", response_model=ActionResult, status_code=202,
              responses=_ACTION, tags=["actions"])
    def return_orphan(caller: Operator, orphan_id: Annotated[str, Path(max_length=300)],
                      body: Reason = None) -> dict[str, Any]:
        """Give back an orphaned host or grant (its id in the orphans list)."""
        result = ops.return_orphan(orphan_id, body.reason if body else "", caller.name)
        log.info("api: %s: %s", caller.name, result["message"])
        return result

    @app.post("/v1/reload", response_model=Reloaded, tags=["actions"],
              responses={**_AUTH, 404: {"model": Error, "description": "this server reloads no config"},
                         409: {"model": Error, "description": "the config file is invalid: the running one stays"}})
    def reload_config(caller: Operator) -> Any:
        """Read the daemon's config file again and run on it, as SIGHUP does: providers added, removed or
        changed, policy and budget; an invalid file changes nothing and is answered 409 with its problems."""
        if reload is None:
            raise ApiError(404, "this server has no config file to reload")
        log.info("api: %s asked for a reload", caller.name)
        result = reload()
        if not result["ok"]:
            errors = result["errors"]
            more = f" ({len(errors) - 1} more)" if len(errors) > 1 else ""
            raise ApiError(409, f"config not reloaded, the running one stays: {errors[0]}{more}",
                           [{"field": "config", "message": e} for e in errors])
        return result

    # --- audit ----------------------------------------------------------------------------

    @app.get("/v1/audit", response_model=AuditPage, responses=_AUTH, tags=["audit"])
    def audit(_: Reader, after: Annotated[str | None, Query(pattern=r"^[0-9a-f]{64}$")] = None,
              limit: Limit = 100) -> dict[str, Any]:
        """Audit lines after the one whose hash is ``after``; without it, the last ``limit``."""
        items = ops.audit(after=after, limit=limit)
        return {"items": items, "next": items[-1]["hash"] if items else after}

    @app.get("/v1/audit/verify", response_model=AuditVerified, responses=_AUTH, tags=["audit"])
    def audit_verify(_: Reader) -> dict[str, Any]:
        """Check the audit log's hash chain from its oldest kept line."""
        return ops.audit_verify()

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
