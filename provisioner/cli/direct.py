"""The CLI's direct path: the operator's surface on the controller itself, with no daemon running.

Facts it appends it also audits, as the daemon does. Views start from the
daemon's snapshot of this log when its home holds one (as the daemon itself
starts): a view of a long log then reads only the facts written since, not
every fact from the first. A snapshot it cannot trust, or read, costs a
warning and a full replay; the rows are the same.
"""

from __future__ import annotations

import getpass
from pathlib import Path

from config.models import Config, PolicyConfig
from messages.facts import Fact
from persistence.port import Controller
from persistence.snapshot import SnapshotStore
from policy.settings import plan_settings
from provisioner.audit.log import AuditLog
from provisioner.read.model import ReadModel
from provisioner.surface.local import Local
from provisioner.surface.operations import CommitFailed, Operations


class Direct(Local):
    """``Local`` on Operations that commit straight to ``controller``, acting as the user who runs the CLI."""

    def __init__(self, controller: Controller, home: Path, cfg: Config | None, url: str) -> None:
        self.controller = controller
        self.audit_log = AuditLog(home / "audit.log")
        billing = plan_settings(cfg.policy, cfg.budget, cfg.providers).billing_units if cfg else None
        snapshots = SnapshotStore.for_controller(home, url, quiet=True)
        ops = Operations(ReadModel(controller, snapshots), controller, self._commit, self.audit_log,
                         billing_units=billing,
                         max_demand_items=cfg.policy.max_demand_items if cfg else PolicyConfig().max_demand_items)
        super().__init__(ops, _user())

    def _commit(self, facts: list[Fact]) -> list[Fact]:
        result = self.controller.append(facts)
        if result.refused:
            raise CommitFailed("; ".join(r.reason for r in result.refused))
        self.audit_log.catch_up(self.controller)
        return result.accepted

    def close(self) -> None:
        self.controller.close()


def _user() -> str:
    try:
        return f"{getpass.getuser()} via cli"
    except (KeyError, OSError):
        return "cli"
