"""Operators' actions: steer a provider, return hosts one or many, return an orphan, reload the config."""

import logging
from typing import Annotated, Any, Callable

from fastapi import APIRouter, Path, Request

from provisioner.api.access import Operating, Operator, Reason
from provisioner.api.errors import ACTION, AUTH, ApiError
from provisioner.api.models import ActionResult, BulkResult, Error, Reloaded
from provisioner.surface.bulk import Bulk, BulkBody, BulkFilter
from provisioner.surface.protocol import Steer

log = logging.getLogger(__name__)

router = APIRouter()


def _steering(action: Steer) -> Callable[..., dict[str, Any]]:
    """``POST /v1/providers/{name}/<action>``."""
    def run(surface: Operating, name: Annotated[str, Path(max_length=200)], body: Reason = None) -> dict[str, Any]:
        result = surface.steer(name, action, body.reason if body else "")
        log.info("api: %s: %s", surface.by, result["message"])
        return result

    run.__doc__ = f"Ask the owner of a provider to {action} it (recorded as a fact)."
    return run


for _action in ("pause", "resume", "drain"):
    router.post(f"/v1/providers/{{name}}/{_action}", response_model=ActionResult, status_code=202,
                responses=ACTION, tags=["actions"], name=f"{_action}_provider")(_steering(_action))  # type: ignore[arg-type]


def _bulk(action: Bulk) -> Callable[..., dict[str, Any]]:
    """``POST /v1/instances/<action>``."""
    def run(surface: Operating, body: BulkBody) -> dict[str, Any]:
        f = BulkFilter.model_validate(body.model_dump(include=set(BulkFilter.model_fields)))
        result = surface.bulk(action, f, body.reason, body.dry_run)
        log.info("api: %s: %s", surface.by, result["message"])
        return result

    run.__doc__ = (f"{action.capitalize()} every host the filters match (all of them at once): `state`, "
                   "`provider`, `older_than` (a duration), `name` (a glob), or `all`; `dry_run` writes nothing. "
                   + ("Busy hosts go back at once." if action == "return" else
                      "Each host goes back once it is not busy."))
    return run


for _action in ("return", "drain"):
    router.post(f"/v1/instances/{_action}", response_model=BulkResult, status_code=202, responses=ACTION,
                tags=["actions"], name=f"{_action}_instances")(_bulk(_action))  # type: ignore[arg-type]


@router.post("/v1/instances/{instance_id:path}/return", response_model=ActionResult, status_code=202,
             responses=ACTION, tags=["actions"])
def return_instance(surface: Operating, instance_id: Annotated[str, Path(max_length=300)],
                    body: Reason = None) -> dict[str, Any]:
    """Give a host back: ``PROVIDER/MACHINE_ID``, a machine id or a host name."""
    result = surface.return_instance(instance_id, body.reason if body else "")
    log.info("api: %s: %s", surface.by, result["message"])
    return result


@router.post("/v1/orphans/{orphan_id:path}/return", response_model=ActionResult, status_code=202,
             responses=ACTION, tags=["actions"])
def return_orphan(surface: Operating, orphan_id: Annotated[str, Path(max_length=300)],
                  body: Reason = None) -> dict[str, Any]:
    """Give back an orphaned host or grant (its id in the orphans list)."""
    result = surface.return_orphan(orphan_id, body.reason if body else "")
    log.info("api: %s: %s", surface.by, result["message"])
    return result


@router.post("/v1/reload", response_model=Reloaded, tags=["actions"],
             responses={**AUTH, 404: {"model": Error, "description": "this server reloads no config"},
                        409: {"model": Error, "description": "the config file is invalid: the running one stays"}})
def reload_config(request: Request, caller: Operator) -> Any:
    """Read the daemon's config file again and run on it, as SIGHUP does: providers added, removed or
    changed, policy and budget; an invalid file changes nothing and is answered 409 with its problems."""
    reload = request.app.state.reload
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
