"""A running daemon reads its config again: providers added, removed and changed, policy changed, nothing
lost; an invalid file changes nothing. Through ``Daemon.reload`` (what SIGHUP and POST /v1/reload call)."""

from __future__ import annotations

import json

import pytest
import yaml

from messages.demand import DemandSnapshot, HostItem
from persistence.controller import open_controller
from persistence.replay import replay
from provisioner.daemon.root import Daemon
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_provider, wait_until

pytestmark = pytest.mark.slow


def holders(controller) -> dict[str, str]:
    return {lease.name: lease.holder for lease in controller.leases.all()}


def test_reload_adds_removes_and_retunes_providers_without_losing_state(tmp_path):
    hosts = sim_provider(tmp_path, "hosts", HOSTS_SIM)
    units = sim_provider(tmp_path, "units", UNITS_SIM)
    cfg = make_config(tmp_path, [hosts])
    path = tmp_path / "provisioner.yaml"
    doc = cfg.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    path.write_text(yaml.safe_dump(doc))
    daemon = Daemon(cfg, tmp_path / "home", tick=0.05, config_file=path).start()
    c = open_controller(cfg.controller.url)
    try:
        c.put_demand(DemandSnapshot(items=[HostItem(id="d", count=2, select={"ncpus": ">=8"})]))
        wait_until(lambda: sum(i.state == "running" for i in replay(c).instances.values()) == 2, what="2 hosts")

        # Add the units provider (and its resource), raise the hosts provider's priority, change the policy.
        doc["instance"]["serves"] = ["hosts", "units"]
        doc["providers"] = [{**hosts, "describe": {"priority": 42}}, units]
        doc["resources"] = [{"name": "vcs", "elastic": True, "base": 2, "provider": "units"}]
        doc["policy"]["idle_time"] = "1h"
        path.write_text(yaml.safe_dump(doc))
        result = daemon.reload()
        assert result["ok"] and result["errors"] == []
        assert result["changes"] == ["provider units: now served here",
                                     "provider hosts: describe changed; its owner is told",
                                     "policy: idle_time changed", "resources changed"]
        wait_until(lambda: holders(c).get("provider:units") == "a", what="the new provider's lease")
        wait_until(lambda: (r := replay(c).providers.get("units")) is not None and r.description is not None
                   and r.description.pools,
                   what="the new provider described")
        wait_until(lambda: replay(c).providers["hosts"].description.priority == 42,
                   what="the hosts provider described again with the new override")
        assert sum(i.state == "running" for i in replay(c).instances.values()) == 2, "nothing lost"
        assert daemon.cfg.policy.idle_time == 3600

        # An invalid file: the running config stays, and the error names the place.
        good = path.read_text()
        path.write_text(good.replace("idle_time: 1h", "idle_time: 1 hour"))
        bad = daemon.reload()
        assert not bad["ok"] and bad["changes"] == []
        assert any("policy.idle_time: not a duration: '1 hour'" in e for e in bad["errors"]), bad["errors"]
        assert daemon.cfg.policy.idle_time == 3600 and holders(c).get("provider:units") == "a"

        # Remove the hosts provider: its owner stops, its lease is released; its hosts stay in the facts.
        doc["instance"]["serves"] = ["units"]
        doc["providers"] = [units]
        path.write_text(yaml.safe_dump(doc))
        result = daemon.reload()
        assert result["changes"][0] == "provider hosts: removed; its owner stops and its lease is released"
        wait_until(lambda: "provider:hosts" not in holders(c), what="the removed provider's lease released")
        # The lease is released first, then its loss recorded (a fact the journal commits a moment later).
        wait_until(lambda: any(f.kind == "lease_lost" and f.provider == "hosts" for f in c.read()),
                   what="the release recorded")
        p = replay(c)
        assert sum(i.state == "running" for i in p.instances.values()) == 2 and holders(c)["provider:units"] == "a"
    finally:
        daemon.stop()
        c.close()


def test_a_provider_changed_by_a_reload_starts_without_the_cooldown_its_old_settings_caused(tmp_path):
    """Every request failed under the old settings (no capacity), so the template cools down for an hour;
    the env_file is fixed and the config reloaded: the provider orders at once (it waited out the
    cooldown), because the reload recorded provider_reconfigured, which a replay reads too."""
    hosts = sim_provider(tmp_path, "hosts", {**HOSTS_SIM, "capacity_error_rate": 1.0})
    folder = tmp_path / "hosts"
    (folder / "fixed.json").write_text(json.dumps(HOSTS_SIM))
    fixed_env = folder / "fixed.env"
    fixed_env.write_text(f"SIM_CONFIG={folder / 'fixed.json'}\nSIM_STATE_DIR={folder / 'state'}\n")
    fixed_env.chmod(0o600)
    cfg = make_config(tmp_path, [hosts], policy={"cooldown": "1h", "backoff_max": "1h"})
    path = tmp_path / "provisioner.yaml"
    doc = cfg.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    path.write_text(yaml.safe_dump(doc))
    daemon = Daemon(cfg, tmp_path / "home", tick=0.05, config_file=path).start()
    c = open_controller(cfg.controller.url)
    try:
        c.put_demand(DemandSnapshot(items=[HostItem(id="d", count=2, select={"ncpus": ">=8"})]))
        wait_until(lambda: any(r.state == "failed" and r.outcome == "capacity"
                               for r in replay(c).requests.values()), what="a request refused for capacity")
        wait_until(lambda: any("cooling down" in cand.why for d in replay(c).decisions
                               for cand in d.decision.candidates), what="the template cooling down")

        doc["providers"] = [{**hosts, "env_file": str(fixed_env)}]
        path.write_text(yaml.safe_dump(doc))
        result = daemon.reload()
        assert result["changes"] == ["provider hosts: env_file changed; a fresh owner takes over, without the old "
                                     "settings' cooldowns"]
        [fact] = [f for f in c.read() if f.kind == "provider_reconfigured"]
        assert (fact.provider, fact.lease, fact.payload.changed) == ("hosts", "", ["env_file"])
        wait_until(lambda: sum(i.state == "running" for i in replay(c).instances.values()) == 2,
                   what="2 hosts ordered within the hour's cooldown")
        assert replay(c).providers["hosts"].strikes_cleared_at == fact.time, "a restart reads the same"
    finally:
        daemon.stop()
        c.close()
