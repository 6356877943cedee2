"""Bundle items in the simulator: traces, packed hosts in flight, the scheduler's placement, packing efficiency."""

from __future__ import annotations

import csv

import pytest

from messages.demand import BundleItem
from sim.report import Result, Variant, table, write_outputs
from tests.support.traces import config, simulate, trace

HOUR = 3600.0


def cloud(*templates: tuple[str, dict, float], behaviour: dict | None = None, **desc) -> dict:
    """A hosts provider with templates (id, attributes, price per hour)."""
    return {"description": {"name": "cloud", "kind": "hosts", "priority": 10, "cost_per_hour": 1.0,
                            "templates": [{"id": t, "max_number": 50, "cost_per_hour": price, "attributes": attrs}
                                          for t, attrs, price in templates], **desc},
            "behaviour": {"lead_time": 60, "call_time": 1, "return_time": 10, **(behaviour or {})}}


X8 = ("x8", {"type": "X86_64", "ncpus": 8, "mem": 32}, 0.4)
BIG = ("big", {"type": "BIG", "ncpus": 16, "mem": 64}, 3.0)


def bundles(count: int, item: str = "j", **shape) -> dict:
    return {"id": item, "kind": "bundles", "count": count, "resources": {"ncpus": 2, "mem": 8}, **shape}


def packed_orders(engine) -> list[tuple]:
    return [(round(o.at - engine.start), o.order.template, o.order.count, o.order.bundles)
            for o in engine.p.orders.values() if o.order.action == "request"]


def test_a_trace_declares_bundle_items_and_refuses_bad_ones_with_their_line():
    tr = trace({"time": 0, "items": [bundles(5, select={"type": "X86_64"}, exclusive=True, priority=2)]},
               {"time": 60, "items": [{"id": "j", "count": 7}]}, {"time": 120})
    first, later = tr.steps[0].items[0], tr.steps[1].items[0]
    assert isinstance(first, BundleItem) and first.resources == {"ncpus": 2, "mem": 8}
    assert (first.exclusive, first.priority, first.select) == (True, 2, {"type": "X86_64"})
    assert later == first.model_copy(update={"count": 7})
    with pytest.raises(ValueError) as exc:
        trace({"time": 0, "items": [{"id": "j", "kind": "bundles", "count": 5, "resources": {"ncpus": 0}}]})
    assert "test.jsonl:2: items[0]: item 'j': resources" in str(exc.value) and "above 0" in str(exc.value)


def test_packed_hosts_in_flight_order_nothing_more_while_snapshots_repeat():
    # Hosts take 40 minutes to come: the rounds' view is trimmed several times meanwhile, and an
    # item nobody can serve changes every minute, so the scheduler publishes the same 16 bundles
    # again and again. One packed order of 4 hosts answers them all.
    cfg = config(cloud(X8, behaviour={"lead_time": 2400}), policy={"request_timeout": "2h"})
    steps = [{"time": 0, "items": [bundles(16), {"id": "noise", "kind": "hosts", "count": 1,
                                                 "select": {"type": "ARM64"}}]}]
    steps += [{"time": 60 * k, "items": [{"id": "noise", "count": 1 + k % 3}]} for k in range(1, 60)]
    steps.append({"time": 2 * HOUR})
    tr = trace(*steps)
    report, e = simulate(cfg, tr)
    assert packed_orders(e) == [(0, "x8", 4, {"j": 16})]
    assert report["counts"]["hosts launched"] == 4
    assert report["unmet_bundle_hours"] == pytest.approx(16 * (e.p.instances[min(e.p.instances)].joined_at
                                                               - e.start) / HOUR, rel=0.01)
    assert e.rounds > 20, "many rounds saw the same bundles and ordered nothing"
    for kw in ({"trim": False}, {"every_tick": True}):
        _, plain = simulate(cfg, tr, **kw)
        assert packed_orders(plain) == packed_orders(e), kw


def test_packing_efficiency_counts_the_bundle_hosts_and_what_their_bundles_use(tmp_path):
    # Two bundles of 2 CPUs and 16 GiB fill the 32 GiB of an 8-CPU host: memory full, CPUs half used.
    # The host item's BIG hosts run no bundles and are not counted.
    cfg = config(cloud(X8, BIG))
    tr = trace({"time": 0, "items": [bundles(6, resources={"ncpus": 2, "mem": 16}, select={"type": "X86_64"}),
                                     {"id": "batch", "kind": "hosts", "count": 2, "select": {"type": "BIG"}}]},
               {"time": 2 * HOUR})
    report, e = simulate(cfg, tr)
    assert sorted((t, n) for _, t, n, _ in packed_orders(e)) == [("big", 2), ("x8", 3)]
    assert report["packing"]["mem"]["efficiency"] == 1.0
    assert report["packing"]["ncpus"]["efficiency"] == 0.5
    joined = min(i.joined_at for i in e.p.instances.values() if i.template == "x8")
    assert report["packing"]["ncpus"]["allocated_hours"] == pytest.approx(24 * (e.end - joined) / HOUR, abs=1e-3)
    result = Result(Variant("base", ()), cfg, report, e)
    assert "packing efficiency ncpus" in table([result]) and "50.0%" in table([result])
    write_outputs(tmp_path, [result], tr, "sim.yaml", plots=True)
    last = list(csv.DictReader((tmp_path / "series.csv").open()))[-1]
    assert (float(last["allocated:ncpus"]), float(last["used:ncpus"])) == (24.0, 12.0)
    assert (float(last["allocated:mem"]), float(last["used:mem"])) == (96.0, 96.0)
    assert (last["wanted_bundles"], last["unmet_bundles"]) == ("6", "0")
    assert (tmp_path / "packing-base.png").stat().st_size > 0


def test_the_scheduler_runs_on_each_host_the_bundles_the_planner_packed_onto_it():
    # 3 bundles of j (2 CPUs, 8 GiB) and 4 of k (1 CPU, 6 GiB) fill one 8-CPU, 32 GiB host as
    # planned only if mixed: a first-fit of j then k would strand k's last bundles.
    cfg = config(cloud(X8))
    tr = trace({"time": 0, "items": [bundles(6), bundles(8, item="k", resources={"ncpus": 1, "mem": 6})]},
               {"time": HOUR})
    report, e = simulate(cfg, tr)
    (order,) = packed_orders(e)
    assert order[3] == {"j": 6, "k": 8}
    assert sum(h.bundles.get("j", 0) for h in e.scheduler.hosts.values()) == 6
    assert sum(h.bundles.get("k", 0) for h in e.scheduler.hosts.values()) == 8
    assert all(h.bundles == h.plan for h in e.scheduler.hosts.values())


def test_hosts_bought_for_bundles_returned_then_bought_again_within_the_hold_are_thrash():
    cfg = config({**cloud(X8), "policy": {"billing_unit": HOUR}}, policy={"idle_time": "1m"})
    report, e = simulate(cfg, trace({"time": 0, "items": [bundles(8)]}, {"time": 1800, "items": [bundles(0)]},
                                    {"time": 1950, "items": [bundles(8)]}, {"time": HOUR}))
    assert report["counts"]["returns ordered"] == 1
    assert len(packed_orders(e)) == 2 and report["thrash"] == 1
