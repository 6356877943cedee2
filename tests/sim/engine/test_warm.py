"""Warm capacity in the simulator: a burst served by warm hosts without waiting, and what they cost against it."""

from __future__ import annotations

import pytest

from sim.config import ConfigError, SimConfig, with_settings
from sim.report import simulate as simulate_variants
from sim.report import table, variants
from tests.support.traces import POLICY, batch, config, hosts, simulate, trace

HOUR = 3600.0


def _bursts():
    """Quiet hours with bursts of 2 hosts' work for 10 minutes, on a provider with a 3-minute lead time."""
    steps = [{"time": 0, "items": [batch(0)]}]
    for k in range(1, 6):
        steps += [{"time": k * HOUR, "items": [{"id": "batch", "count": 2}]},
                  {"time": k * HOUR + 600, "items": [{"id": "batch", "count": 0}]}]
    return trace(*steps, {"time": 6 * HOUR})


def test_warm_hosts_serve_a_burst_at_once_where_without_them_it_waits_the_lead_time():
    cold = config(hosts("a", behaviour={"lead_time": 180}))
    warm = config(hosts("a", behaviour={"lead_time": 180}), policy={**POLICY, "min_idle": 2})
    without, _ = simulate(cold, _bursts())
    with_, e = simulate(warm, _bursts())
    assert without["time_to_capacity_p50_s"] == 190.0, "ordered at once, up 180 s later, joined 10 s after"
    assert with_["time_to_capacity_p50_s"] is None, "no unit of the bursts' need ever waited"
    assert with_["unmet_host_hours"] == 0.0 < without["unmet_host_hours"]
    assert with_["warm_hosts"] >= 2 and with_["warm_cost"] > with_["warm_idle_cost"] > 0
    assert with_["total_cost"] > without["total_cost"], "warm hosts cost like any host"
    burst_orders = [o for o in e.p.orders.values() if o.order.item_id == "batch"]
    assert burst_orders == [], "the bursts found their hosts ready: nothing was ordered for them"


def test_sim_compare_warm_sets_the_policy_and_the_table_sets_cost_against_wait_saved():
    raw = {"seed": 1, "policy": dict(POLICY), "scheduler": {"join_delay": "10s", "publish_every": 0},
           "series_every": "1m", "providers": [hosts("a", behaviour={"lead_time": 180})]}
    chosen = variants([], ["warm-2:min_idle=2"])
    assert [(v.name, v.settings) for v in chosen] == [("base", ()), ("warm-2", ("min_idle=2",))]
    assert with_settings(raw, ["min_idle=2", "warm_schedule=08:00-20:00 Mon-Fri"], "--compare").policy.min_idle == 2
    results = simulate_variants(raw, _bursts(), chosen, "--compare")
    printed = table(results)
    rows = {line.split("  ")[0]: line.split()[-2:] for line in printed.splitlines() if line}
    base, warm = results[0].report, results[1].report
    assert rows["warm hosts bought"] == ["0", str(warm["warm_hosts"])]
    saved = base["unmet_host_hours"] - warm["unmet_host_hours"]
    extra = warm["total_cost"] - base["total_cost"]
    assert rows["cost vs base"][1] == f"{extra:+,.2f}"
    assert rows["cost per host-hour of wait saved"] == ["-", f"{extra / saved:,.2f}"]


def test_a_bad_warm_setting_in_a_variant_names_itself():
    raw = {"seed": 1, "policy": dict(POLICY), "providers": [hosts("a")]}
    with pytest.raises(ConfigError) as info:
        with_settings(raw, ["warm_schedule=8-20"], "--compare (warm)")
    assert str(info.value) == ("--compare (warm): 'warm_schedule=8-20': policy.warm_schedule: not a schedule window: "
                               "'8-20' (HH:MM-HH:MM, then the days, e.g. 08:00-20:00 Mon-Fri)")
    with pytest.raises(ValueError, match="provider lic: warm capacity keeps hosts, and it lends units"):
        SimConfig.model_validate({"providers": [{"description": {"name": "lic", "kind": "units"},
                                                 "policy": {"warm": [{"min_idle": 1}]}}]})
