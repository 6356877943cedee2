"""The audit log: a page of its lines, and the check of its hash chain (``provisioner audit``)."""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from provisioner.api.access import Limit, Viewing
from provisioner.api.errors import AUTH
from provisioner.api.models import AuditPage, AuditVerified

router = APIRouter()


@router.get("/v1/audit", response_model=AuditPage, responses=AUTH, tags=["audit"])
def audit(surface: Viewing, after: Annotated[str | None, Query(pattern=r"^[0-9a-f]{64}$")] = None,
          limit: Limit = 100) -> dict[str, Any]:
    """Audit lines after the one whose hash is ``after``; without it, the last ``limit``."""
    items = surface.audit(after, limit)
    return {"items": items, "next": items[-1]["hash"] if items else after}


@router.get("/v1/audit/verify", response_model=AuditVerified, responses=AUTH, tags=["audit"])
def audit_verify(surface: Viewing) -> dict[str, Any]:
    """Check the audit log's hash chain from its oldest kept line."""
    return surface.audit_verify()
