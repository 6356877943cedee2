"""The scheduler's inputs: the demand, host events, the supply view (``provisioner demand put``, ``host``...)."""

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path

from messages.demand import DemandSnapshot, SupplySnapshot
from provisioner.api.access import Ops, Reader, Scheduling
from provisioner.api.errors import AUTH
from provisioner.api.models import DemandStored, Error, HostEventBody, HostEventOut

log = logging.getLogger(__name__)

HOST_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$"

router = APIRouter()


@router.put("/v1/demand", response_model=DemandStored, responses=AUTH, tags=["demand"])
def put_demand(surface: Scheduling, snapshot: DemandSnapshot) -> dict[str, Any]:
    """Replace the demand; the controller assigns ``seq`` and ``time``. ``warnings`` names items no
    configured provider can ever serve (stored all the same)."""
    stored = surface.put_demand(snapshot)
    log.info("api: %s put demand %d (%d items)", surface.by, stored["seq"], len(stored["items"]))
    for line in stored["warnings"]:
        log.warning("api: demand %d from %s: %s", stored["seq"], surface.by, line)
    return stored


# A name with a line break matches no route at all (the path pattern stops at it): 404.
@router.post("/v1/hosts/{name:path}/events", response_model=HostEventOut, tags=["demand"],
             responses={**AUTH, 404: {"model": Error, "description": "no live host has that name"},
                        409: {"model": Error, "description": "the name is live at several providers: name one"}})
def host_event(surface: Scheduling, name: Annotated[str, Path(max_length=200, pattern=HOST_NAME)],
               body: HostEventBody) -> dict[str, Any]:
    """A host joined the cluster, went idle or became busy (``name`` as the provider reported it).

    ``provider`` in the body names whose host it is; without it, the name must be live at one provider.
    """
    return surface.host_event(name, body.event, body.provider)


@router.get("/v1/supply", response_model=SupplySnapshot | None, responses=AUTH, tags=["demand"])
def supply(ops: Ops, _: Reader) -> Any:
    """The scheduler's current view of its hosts; null before the first."""
    return ops.supply()


@router.put("/v1/supply", response_model=SupplySnapshot, responses=AUTH, tags=["demand"])
def put_supply(surface: Scheduling, view: SupplySnapshot) -> dict[str, Any]:
    """Replace the scheduler's view of its hosts (idle or busy); it corrects host events that were lost."""
    stored = surface.put_supply(view)
    log.info("api: %s put supply view %d (%d hosts)", surface.by, stored["seq"], len(stored["hosts"]))
    return stored
