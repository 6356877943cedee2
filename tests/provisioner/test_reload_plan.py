"""What a reload changes, worked out from the running config and the file read again."""

from __future__ import annotations

from config.models import Config
from provisioner.daemon.reload import plan_reload

SCRIPT = {"style": "v2", "path": "/bin/true"}


def config(**over) -> Config:
    doc = {"instance": {"id": "a", "serves": ["keep", "tuned", "moved", "gone"], "planner": True},
           "controller": {"url": "sqlite:///var/state.db"},
           "providers": [{"name": n, "kind": "hosts", "script": SCRIPT} for n in ("keep", "tuned", "moved", "gone")],
           "policy": {"idle_time": "10m"}}
    doc.update(over)
    return Config.model_validate(doc)


def test_served_providers_added_removed_changed_and_what_waits_for_a_restart():
    old = config()
    new = config(
        instance={"id": "b", "serves": ["keep", "tuned", "moved", "new"], "planner": False, "script_workers": 4},
        controller={"url": "sqlite:///elsewhere.db"},
        providers=[{"name": "keep", "kind": "hosts", "script": SCRIPT},
                   {"name": "tuned", "kind": "hosts", "script": SCRIPT, "describe": {"priority": 5},
                    "policy": {"max_cost_per_hour": 3}},
                   {"name": "moved", "kind": "hosts", "script": {**SCRIPT, "path": "/usr/bin/true"}},
                   {"name": "new", "kind": "units", "script": SCRIPT}],
        policy={"idle_time": "30m"}, budget={"max_hosts": 10})
    plan = plan_reload(old, new)
    assert plan.changes == [
        "provider new: now served here",
        "provider gone: removed; its owner stops and its lease is released",
        "provider moved: script changed; a fresh owner takes over, without the old settings' cooldowns",
        "provider tuned: describe, policy changed; its owner is told",
        "instance.planner: no longer plans; the planner lease is released",
        "policy: idle_time changed",
        "budget: max_hosts changed",
    ]
    assert plan.restart == {"moved"}
    assert plan.reconfigured == {"moved": ["script"]}, "its provider_reconfigured fact; tuned keeps its cooldowns"
    assert plan.restart_needed == ["instance.id changed: kept as it was until the daemon restarts",
                                   "instance.script_workers changed: kept as it was until the daemon restarts",
                                   "controller changed: kept as it was until the daemon restarts"]
    kept = plan.config
    assert (kept.instance.id, kept.instance.script_workers, kept.controller.url) == ("a", 32, "sqlite:///var/state.db")
    assert kept.instance.serves == ["keep", "tuned", "moved", "new"] and kept.policy.idle_time == 1800


def test_the_same_file_changes_nothing():
    plan = plan_reload(config(), config())
    assert (plan.changes, plan.restart_needed, plan.restart, plan.reconfigured) == ([], [], set(), {})
