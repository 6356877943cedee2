"""Carrying out a reload: read the file again, work out what changed (``daemon.reload``), apply it.

The daemon registers what each part needs to hear (``on_config``: the
actors' ``Reconfigure``, the metrics, the ticker's period, the REST
operations' settings); this module owns the config in force and the order:
an invalid file changes nothing; a provider whose calls changed has
``provider_reconfigured`` recorded before its fresh owner starts, so its
cooldowns end there; then every part is told. Reloads run one at a time
(SIGHUP, ``provisioner reload`` and ``POST /v1/reload`` may come at once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config.load import load_config
from config.located import ConfigError
from config.models import Config
from messages.facts import ProviderReconfigured, make_fact
from provisioner.daemon.journal_bridge import JournalBridge
from provisioner.daemon.reload import ReloadPlan, plan_reload

log = logging.getLogger(__name__)


class Reloader:
    def __init__(self, cfg: Config, config_file: Path | None, bridge: JournalBridge,
                 running: Callable[[], bool]) -> None:
        """``config_file``: where ``cfg`` was read from (None: the built-in demo, which has none to read).
        ``running``: whether the daemon's actors run (before that, only the config in force changes)."""
        self.config = cfg
        self.config_file = config_file
        self.bridge = bridge
        self.running = running
        self._lock = threading.Lock()
        self._parts: list[Callable[[Config, ReloadPlan], None]] = []

    def on_config(self, part: Callable[[Config, ReloadPlan], None]) -> None:
        """``part(new config, plan)`` after every valid reload, in the order the parts were registered."""
        self._parts.append(part)

    def reload(self) -> dict[str, Any]:
        """Read the config file again and run on it; an invalid one changes nothing.

        Returns what happened: ``ok``, the ``changes``, what needs a restart, or the ``errors`` that kept
        the old config.
        """
        with self._lock:
            if self.config_file is None:
                return self._result(False, errors=["this daemon runs the built-in demo: there is no config file "
                                                   "to read again"])
            try:
                new = load_config(self.config_file)
            except ConfigError as exc:
                return self._result(False, errors=[str(i) for i in exc.issues] or [str(exc)])
            except (OSError, ValueError) as exc:
                return self._result(False, errors=[f"{self.config_file}: {exc}"])
            plan = plan_reload(self.config, new)
            self.config = plan.config
            if self.running():
                self._reconfigured(plan.reconfigured)
            for part in self._parts:
                part(plan.config, plan)
            return self._result(True, changes=plan.changes, restart_needed=plan.restart_needed)

    def _reconfigured(self, changed: dict[str, list[str]]) -> None:
        """Record that a reload changed what these providers' calls run with, before their fresh owners start:
        their cooldowns end there (``provider_reconfigured``, an operator's act: unfenced). Not recorded
        (the controller out of reach), they keep them until they run out, and the log says so."""
        if not changed:
            return
        facts = [make_fact(ProviderReconfigured(changed=parts), provider=name)  # type: ignore[arg-type]
                 for name, parts in sorted(changed.items())]
        reply = self.bridge.write(facts)
        why = reply.error or "; ".join(reason for _, _, reason in reply.refused)
        if why:
            log.warning("reload: provider_reconfigured not recorded for %s, their cooldowns stay until they run "
                        "out (provisioner provider resume ends them): %s", ", ".join(sorted(changed)), why)

    def _result(self, ok: bool, changes: list[str] | None = None, restart_needed: list[str] | None = None,
                errors: list[str] | None = None) -> dict[str, Any]:
        result = {"ok": ok, "config": str(self.config_file) if self.config_file else None,
                  "changes": changes or [], "restart_needed": restart_needed or [], "errors": errors or []}
        if not ok:
            log.error("reload: config not reloaded, the running one stays: %s", "; ".join(result["errors"]))
            return result
        log.info("reload: %s read again: %s", self.config_file, "; ".join(result["changes"]) or "nothing changed")
        for line in result["restart_needed"]:
            log.warning("reload: %s", line)
        return result
