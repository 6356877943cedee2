"""The operator's surface on an ``Operations`` of this process, acting as someone.

The CLI's direct path (``provisioner.cli.direct``: Operations committing
straight to the controller, as the user running the command) and the REST
routes (Operations committing through the daemon's journal, as the token's
name) both ask through it, so the two answer each request with the same
document; ``provisioner.cli.client.Remote`` asks the routes for it.
"""

from __future__ import annotations

from typing import Any

from messages.demand import DemandSnapshot, HostEventKind, SupplySnapshot
from provisioner.surface.bulk import Bulk, BulkFilter
from provisioner.surface.operations import Operations
from provisioner.surface.protocol import Steer


class Local:
    """``Surface`` on ``ops``; actions are recorded as done by ``by``."""

    def __init__(self, ops: Operations, by: str) -> None:
        self.ops = ops
        self.by = by

    def page(self, view: str, where: dict[str, Any], after: str | None = None,
             limit: int | None = None) -> tuple[list[dict[str, Any]], str | None]:
        return self.ops.list(view, where=where, after=after, limit=limit)

    def rows(self, view: str, **where: Any) -> list[dict[str, Any]]:
        return self.page(view, where)[0]

    def demand(self) -> dict[str, Any] | None:
        d = self.ops.demand()
        return d.to_dict() if d else None

    def put_demand(self, snapshot: DemandSnapshot) -> dict[str, Any]:
        stored = self.ops.put_demand(snapshot)
        return {**stored.to_dict(), "warnings": self.ops.demand_warnings(stored)}

    def host_event(self, name: str, event: HostEventKind, provider: str | None = None) -> dict[str, Any]:
        return self.ops.host_event(name, event, provider)

    def put_supply(self, view: SupplySnapshot) -> dict[str, Any]:
        return self.ops.put_supply(view).to_dict()

    def steer(self, provider: str, action: Steer, reason: str) -> dict[str, Any]:
        return self.ops.steer(provider, action, reason, self.by)

    def return_instance(self, ident: str, reason: str) -> dict[str, Any]:
        return self.ops.return_instance(ident, reason, self.by)

    def return_orphan(self, ident: str, reason: str) -> dict[str, Any]:
        return self.ops.return_orphan(ident, reason, self.by)

    def bulk(self, action: Bulk, f: BulkFilter, reason: str, dry_run: bool) -> dict[str, Any]:
        return self.ops.bulk(action, f, reason, self.by, dry_run=dry_run)

    def audit(self, after: str | None, limit: int) -> list[dict[str, Any]]:
        return self.ops.audit(after=after, limit=limit)

    def audit_verify(self) -> dict[str, Any]:
        return self.ops.audit_verify()

    def close(self) -> None:
        """Nothing held: whoever made ``ops`` closes what it reads."""
