"""What a config reload changes, worked out before anything is touched.

A reload (SIGHUP, ``provisioner reload``, ``POST /v1/reload``) reads the
config file again. An invalid file changes nothing: the daemon keeps the
config it has and says why. A valid one is compared with the running
config, part by part:

- providers added to ``instance.serves`` are taken up at once; providers
  removed stop, and their lease is released once their owner has stopped
  cleanly, so another instance serving them may take over;
- a provider whose ``kind``, ``script`` or ``env_file`` changed is run by a
  fresh owner (its calls go through a new runner), and starts without the
  cooldowns its old settings' failures caused: the daemon records
  ``provider_reconfigured`` for it first; one whose ``describe`` or
  ``policy`` changed keeps its owner, which is told the new settings (and
  describes itself again when its overrides changed);
- ``policy``, ``budget``, ``resources``, ``lease`` and ``instance.planner``
  apply at once, by message to the actors that use them;
- what a running daemon cannot change (``instance.id``, ``controller``,
  ``api``, ``home``, ``instance.script_workers``) is kept as it was, and
  the reload says a restart is needed for it.

Nothing is lost: the state is the facts, which no reload touches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.models import Config, ProviderConfig

#: Parts of the config a running daemon keeps until it restarts.
FIXED = ("instance.id", "instance.script_workers", "controller", "api", "home")


@dataclass
class ReloadPlan:
    #: The config to run on: the new one, with the parts a running daemon cannot change kept.
    config: Config
    #: What changes, one line each, for the log and the answer.
    changes: list[str] = field(default_factory=list)
    #: What changed but needs a restart.
    restart_needed: list[str] = field(default_factory=list)
    #: Providers whose owner is replaced (their script changed).
    restart: set[str] = field(default_factory=set)
    #: Of those, what changed (``kind``, ``script``, ``env_file``): their ``provider_reconfigured`` facts.
    reconfigured: dict[str, list[str]] = field(default_factory=dict)


def _get(cfg: Config, dotted: str) -> Any:
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _keys(old: Any, new: Any) -> list[str]:
    """The keys of two models of one kind whose values differ."""
    a, b = old.model_dump(), new.model_dump()
    return [k for k in a if a[k] != b.get(k)]


#: The parts of a provider's config its calls run with: a change to one replaces its owner.
CALLS = ("kind", "script", "env_file")


def _provider_change(old: ProviderConfig, new: ProviderConfig) -> tuple[list[str], bool]:
    """What differs between two configs of one provider, and whether its owner must be replaced."""
    parts = [k for k in (*CALLS, "describe", "policy") if getattr(old, k) != getattr(new, k)]
    return parts, any(k in CALLS for k in parts)


def plan_reload(old: Config, new: Config) -> ReloadPlan:
    kept: dict[str, Any] = {}
    restart_needed: list[str] = []
    for dotted in FIXED:
        if _get(old, dotted) != _get(new, dotted):
            restart_needed.append(f"{dotted} changed: kept as it was until the daemon restarts")
    instance = new.instance.model_copy(update={"id": old.instance.id,
                                               "script_workers": old.instance.script_workers})
    kept.update(instance=instance, controller=old.controller, api=old.api, home=old.home)
    config = new.model_copy(update=kept)
    plan = ReloadPlan(config=config, restart_needed=restart_needed)

    served_before, served_now = set(old.instance.serves), set(config.instance.serves)
    for name in sorted(served_now - served_before):
        plan.changes.append(f"provider {name}: now served here")
    for name in sorted(served_before - served_now):
        gone = "removed" if config.provider(name) is None else "no longer served here"
        plan.changes.append(f"provider {name}: {gone}; its owner stops and its lease is released")
    for name in sorted(served_before & served_now):
        before, after = old.provider(name), config.provider(name)
        if before is None or after is None or before == after:
            continue
        parts, replaced = _provider_change(before, after)
        if replaced:
            plan.restart.add(name)
            plan.reconfigured[name] = [k for k in parts if k in CALLS]
        plan.changes.append(f"provider {name}: {', '.join(parts)} changed"
                            + ("; a fresh owner takes over, without the old settings' cooldowns" if replaced
                               else "; its owner is told"))
    elsewhere = ({p.name for p in old.providers} | {p.name for p in config.providers}) - served_before - served_now
    for name in sorted(elsewhere):
        before, after = old.provider(name), config.provider(name)
        if before != after:
            what = "added" if before is None else "removed" if after is None else \
                ", ".join(_provider_change(before, after)[0]) + " changed"
            plan.changes.append(f"provider {name}: {what} (served by another instance; planning follows)")
    if old.instance.planner != config.instance.planner:
        plan.changes.append("instance.planner: " + ("may plan now" if config.instance.planner else
                                                    "no longer plans; the planner lease is released"))
    for section in ("policy", "budget", "lease"):
        keys = _keys(getattr(old, section), getattr(config, section))
        if keys:
            plan.changes.append(f"{section}: {', '.join(keys)} changed")
    if old.resources != config.resources:
        plan.changes.append("resources changed")
    return plan
