"""The cluster-wide views, a page at a time: what ``provisioner providers``, ``instances``... list."""

from typing import Annotated, Any

from fastapi import APIRouter, Path

from messages.demand import DemandSnapshot
from provisioner.api.access import After, Filter, Limit, Ops, Reader, Viewing
from provisioner.api.errors import AUTH, FOUND
from provisioner.api.models import (
    CostRow,
    DaemonRow,
    DecisionRow,
    InstanceRow,
    OrphanRow,
    Page,
    ProviderDetail,
    RequestRow,
    ResourceRow,
)
from provisioner.surface.local import Local

router = APIRouter()


def _listing(surface: Local, view: str, after: str | None, limit: int, **where: Any) -> dict[str, Any]:
    items, nxt = surface.page(view, where, after=after, limit=limit)
    return {"items": items, "next": nxt}


@router.get("/v1/providers", response_model=Page[ProviderDetail], responses=AUTH, tags=["views"])
def providers(surface: Viewing, kind: Filter = None, status: Filter = None, owner: Filter = None,
              after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    """Providers with their description, usage and lease owner."""
    return _listing(surface, "providers", after, limit, kind=kind, status=status, owner=owner)


@router.get("/v1/providers/{name}", response_model=ProviderDetail, responses={**AUTH, **FOUND}, tags=["views"])
def provider(ops: Ops, _: Reader, name: Annotated[str, Path(max_length=200)]) -> dict[str, Any]:
    return ops.provider(name)


@router.get("/v1/requests", response_model=Page[RequestRow], responses=AUTH, tags=["views"])
def requests(surface: Viewing, provider: Filter = None, state: Filter = None, action: Filter = None,
             kind: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    return _listing(surface, "requests", after, limit, provider=provider, state=state, action=action, kind=kind)


@router.get("/v1/instances", response_model=Page[InstanceRow], responses=AUTH, tags=["views"])
def instances(surface: Viewing, provider: Filter = None, state: Filter = None, template: Filter = None,
              after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    return _listing(surface, "instances", after, limit, provider=provider, state=state, template=template)


@router.get("/v1/resources", response_model=Page[ResourceRow], responses=AUTH, tags=["views"])
def resources(surface: Viewing, provider: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    return _listing(surface, "resources", after, limit, provider=provider)


@router.get("/v1/costs", response_model=Page[CostRow], responses=AUTH, tags=["views"])
def costs(surface: Viewing, provider: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    return _listing(surface, "costs", after, limit, provider=provider)


@router.get("/v1/decisions", response_model=Page[DecisionRow], responses=AUTH, tags=["views"])
def decisions(surface: Viewing, item: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    """The planner's recent decisions, oldest first; ``after`` is a decision's seq."""
    return _listing(surface, "decisions", after, limit, item=item)


@router.get("/v1/orphans", response_model=Page[OrphanRow], responses=AUTH, tags=["views"])
def orphans(surface: Viewing, provider: Filter = None, kind: Filter = None, state: Filter = None,
            after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    """Orphaned hosts and grants, and requests whose outcome stayed unknown."""
    return _listing(surface, "orphans", after, limit, provider=provider, kind=kind, state=state)


@router.get("/v1/daemons", response_model=Page[DaemonRow], responses=AUTH, tags=["views"])
def daemons(surface: Viewing, state: Filter = None, after: After = None, limit: Limit = 1000) -> dict[str, Any]:
    """Each daemon instance sharing the controller: alive and holding roles (active), alive holding none
    (standby), gone without letting go (lapsed), or stopped; since when, and the roles it holds."""
    return _listing(surface, "daemons", after, limit, state=state)


@router.get("/v1/demand", response_model=DemandSnapshot | None, responses=AUTH, tags=["demand"])
def demand(surface: Viewing) -> Any:
    """The current demand snapshot; null before the first."""
    return surface.demand()
