"""Who may call a route, and what a route is given: the caller by role, the operations, the surface as the caller.

The daemon's parts are the app's state (``create_app``): a route takes them
as dependencies, so routes are plain functions of their own modules.
"""

from typing import Annotated, Any, Callable

from fastapi import Body, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from provisioner.api.auth import OPERATE, READ, SCHEDULE, Caller, Tokens
from provisioner.api.errors import ApiError
from provisioner.api.models import ActionBody
from provisioner.surface.local import Local
from provisioner.surface.operations import Operations

Limit = Annotated[int, Query(ge=1, le=10_000, description="At most this many rows")]
After = Annotated[str | None, Query(max_length=300, description="The `next` of the previous page")]
Filter = Annotated[str | None, Query(max_length=200)]
Reason = Annotated[ActionBody | None, Body()]

bearer = HTTPBearer(auto_error=False, description="A token from the daemon's tokens file (api.tokens)")


def access(allowed: frozenset[str], what: str) -> Callable[..., Caller]:
    """The dependency that answers who calls, or refuses one whose token's role is not ``allowed``."""
    needs = " or ".join(sorted(allowed))

    def check(request: Request, cred: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Caller:
        tokens: Tokens | None = request.app.state.tokens
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


def _operations(request: Request) -> Operations:
    ops: Operations = request.app.state.ops
    return ops


Ops = Annotated[Operations, Depends(_operations)]


def _surface(ops: Ops, caller: Reader) -> Local:
    return Local(ops, caller.name)


def _operating(ops: Ops, caller: Operator) -> Local:
    return Local(ops, caller.name)


def _scheduling(ops: Ops, caller: Scheduler) -> Local:
    return Local(ops, caller.name)


#: The operator's surface as the caller, once the caller's role allows the route.
Viewing = Annotated[Local, Depends(_surface)]
Operating = Annotated[Local, Depends(_operating)]
Scheduling = Annotated[Local, Depends(_scheduling)]


def _query_names(dependant: Any) -> set[str]:
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def known_query(request: Request) -> None:
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
