"""``/healthz``, ``/readyz`` and ``/metrics``."""

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from provisioner.api.access import Ops, Reader
from provisioner.api.errors import AUTH, ApiError, error
from provisioner.api.models import Error, Health, Liveness
from provisioner.version import version

router = APIRouter()


@router.get("/healthz", response_model=Liveness, tags=["health"])
def healthz() -> dict[str, Any]:
    """The process answers; with its version."""
    return {"status": "ok", "version": version()}


@router.get("/readyz", response_model=Health, tags=["health"], responses={503: {"model": Error}})
def readyz(request: Request, ops: Ops) -> Any:
    """The daemon has started and can read the controller."""
    why = request.app.state.ready()
    if why is not None:
        return error(503, f"not ready: {why}")
    ops.read_model.refresh()
    return {"status": "ready", "seq": ops.read_model.seq}


@router.get("/metrics", tags=["health"], response_class=Response,
            responses={**AUTH, 200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
def prometheus(request: Request, _: Reader) -> Response:
    metrics = request.app.state.metrics
    if metrics is None:
        raise ApiError(404, "metrics are not served by this daemon")
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
