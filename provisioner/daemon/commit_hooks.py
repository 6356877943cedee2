"""What the journal's commit hook does after each commit: metrics, the reset guard's mark, the audit log.

Each runs on the journal's thread after the subscribers were told and
before the writers' replies, so an operator's audited fact has its audit
line before the REST request that wrote it returns. One that fails spares
the rest: a hook's failure is logged, never the commit's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from messages.errors import ControllerUnavailable
from messages.facts import Fact
from persistence.port import Controller
from provisioner.audit.auditor import Auditor
from provisioner.audit.log import AuditLog, audited
from provisioner.daemon.resetguard import MarkKeeper
from provisioner.metrics.collector import Metrics

log = logging.getLogger(__name__)

#: Facts the commit hook looks at for the audit log at most (a long history is the auditor thread's).
AUDIT_SLICE = 2_000

Hook = Callable[[list[Fact], float], None]


class CommitHooks:
    def __init__(self, metrics: Metrics, marks: MarkKeeper, audit: AuditLog, auditor: Auditor,
                 controller: Controller, extra: Hook | None = None) -> None:
        """``extra``: the caller's own hook (a test's), run last."""
        self.metrics, self.marks, self.audit, self.auditor = metrics, marks, audit, auditor
        self.controller = controller
        self.extra = extra

    def __call__(self, facts: list[Fact], seconds: float) -> None:
        for hook in (self.metrics.committed, self._marked, self._audit, self.extra):
            if hook is None:
                continue
            try:
                hook(facts, seconds)
            except Exception:
                log.exception("daemon: commit hook %s failed", getattr(hook, "__name__", hook))

    def _marked(self, facts: list[Fact], _seconds: float) -> None:
        self.marks.committed(facts)

    def _audit(self, facts: list[Fact], _seconds: float) -> None:
        """Audit lines for an operator's audited facts now, before the request returns (with whatever came
        before them); the daemon's own (fenced: its planner's, owners', leases') the auditor takes in a moment."""
        mine = [f for f in facts if audited(f)]
        if mine and all(f.lease for f in mine):
            self.auditor.soon()
        elif mine:
            try:
                self.audit.catch_up(self.controller, limit=AUDIT_SLICE)
            except ControllerUnavailable as exc:
                log.warning("audit: cannot read the controller; the auditor catches up later: %s", exc)
