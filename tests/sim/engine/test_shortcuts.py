"""The simulator's two shortcuts decide as the plain way would.

It plans only when something could have changed (``policy.due``) rather
than at every ``plan_every``, and it hands rounds a view trimmed to what is
in motion (``sim.view``). On a busy trace with failures, reclaims, a
failover, licenses and a return window, both shortcuts must give the very
same orders and returns at the very same moments, and the same report.
"""

from __future__ import annotations

from tests.support.traces import batch, config, hosts, simulate, trace, units

HOUR = 3600.0


def _busy_story():
    cfg = config(
        hosts("dear", priority=20, price=2.0, max_number=4, min_hold_s=600,
              policy={"billing_unit": HOUR, "return_window": 600},
              behaviour={"lead_time": {"min": 20, "max": 200}, "capacity_error_rate": 0.2}),
        hosts("spot", priority=10, price=0.3, behaviour={"lead_time": {"median": 90, "sigma": 0.5},
                                                         "reclaim_rate": 1.5, "fail_rate": 0.2}),
        hosts("slow", priority=10, price=0.9, ncpus=16, behaviour={"lead_time": 300, "transient_rate": 0.3}),
        units("lic", behaviour={"lead_time": {"min": 5, "max": 40}}),
        resources=[{"name": "vcs", "elastic": True, "base": 3, "provider": "lic"}],
        policy={"idle_time": "4m", "cooldown": "1m", "backoff_max": "8m"},
        budget={"max_cost_per_hour": 25.0},
    )
    steps = [{"time": 0, "items": [batch(5), batch(2, item="big", ncpus=16),
                                   {"id": "l", "kind": "units", "resource": "vcs", "count": 6}]}]
    wants = [9, 3, 12, 0, 7, 2, 11, 4, 0, 6]
    for k, want in enumerate(wants, start=1):
        step = {"time": k * 900, "items": [{"id": "batch", "count": want}, {"id": "l", "count": (k * 5) % 11}]}
        if k == 4:
            step["failover"] = ["spot"]
        if k == 6:
            step["hosts"] = [{"provider": "spot", "event": "lost", "count": 1}]
        steps.append(step)
    steps.append({"time": (len(wants) + 2) * 900})
    return cfg, trace(*steps)


def _moves(engine):
    """Every order as (when, provider, action, what, count, which machines or grants by their time)."""
    out = []
    for o in engine.p.orders.values():
        grants = tuple(sorted(engine.p.grants[g].granted_at for g in o.order.grants))
        out.append((o.at, o.provider, o.order.action, o.order.template or o.order.resource, o.order.count,
                    tuple(sorted(o.order.machines)), grants))
    return sorted(out)


def _chosen(engine):
    return [(d.at, d.decision.item, [(c.provider, c.count) for c in d.decision.chosen])
            for d in engine.p.decisions if d.decision.chosen]


def test_planning_only_when_something_changed_orders_as_planning_at_every_tick():
    cfg, tr = _busy_story()
    shortcut, fast = simulate(cfg, tr)
    plain, slow = simulate(cfg, tr, every_tick=True, trim=False)
    assert len(_moves(fast)) > 20, "the story should keep the planner busy"
    assert _moves(fast) == _moves(slow)
    assert _chosen(fast) == _chosen(slow)
    for key in ("planning_rounds", "facts"):
        shortcut.pop(key)
        plain.pop(key)
    assert shortcut == plain
    assert fast.rounds * 5 < slow.rounds


def test_the_trimmed_view_decides_as_the_whole_projection():
    cfg, tr = _busy_story()
    trimmed, a = simulate(cfg, tr)
    whole, b = simulate(cfg, tr, trim=False)
    assert _moves(a) == _moves(b)
    assert trimmed == whole
    assert len(a.view.requests) < len(b.p.requests)


def _bundles_story():
    """Two bundle items and a host item on two providers, with failures, reclaims, a failover and caps."""
    def cloud(name: str, priority: int, behaviour: dict, **desc) -> dict:
        return {"description": {"name": name, "kind": "hosts", "priority": priority, "cost_per_hour": 1.0,
                                "templates": [
                                    {"id": f"{name}-4", "max_number": 30, "cost_per_hour": 0.2,
                                     "attributes": {"type": "X86_64", "ncpus": 4, "mem": 16}},
                                    {"id": f"{name}-16", "max_number": 10, "cost_per_hour": 0.75,
                                     "attributes": {"type": "X86_64", "ncpus": 16, "mem": 64}},
                                    {"id": f"{name}-m", "max_number": 10, "cost_per_hour": 0.5,
                                     "attributes": {"type": "X86_64", "ncpus": 4, "mem": 64}}], **desc},
                "behaviour": {"call_time": 1, "return_time": 10, **behaviour}}

    cfg = config(
        cloud("spot", 20, {"lead_time": {"median": 90, "sigma": 0.5}, "reclaim_rate": 1.0,
                           "capacity_error_rate": 0.2}, min_request=2, step=2),
        cloud("ondemand", 10, {"lead_time": {"min": 30, "max": 300}, "fail_rate": 0.1}, min_hold_s=600),
        policy={"idle_time": "4m", "cooldown": "1m", "backoff_max": "8m", "join_grace": "3m"},
        budget={"max_hosts": 40},
    )
    steps = [{"time": 0, "items": [
        {"id": "cpu", "kind": "bundles", "count": 30, "resources": {"ncpus": 2, "mem": 6}},
        {"id": "mem", "kind": "bundles", "count": 6, "resources": {"ncpus": 1, "mem": 24}, "priority": 1},
        batch(2, item="whole", ncpus=16)]}]
    wants = [(40, 8), (12, 2), (60, 12), (0, 0), (25, 5), (8, 9), (45, 1), (0, 3)]
    for k, (cpu, mem) in enumerate(wants, start=1):
        step = {"time": k * 900, "items": [{"id": "cpu", "count": cpu}, {"id": "mem", "count": mem}]}
        if k == 3:
            step["failover"] = ["spot"]
        if k == 5:
            step["hosts"] = [{"provider": "spot", "event": "lost", "count": 2}]
        steps.append(step)
    steps.append({"time": (len(wants) + 2) * 900})
    return cfg, trace(*steps)


def test_with_bundle_items_both_shortcuts_order_and_return_as_the_plain_way():
    cfg, tr = _bundles_story()
    shortcut, fast = simulate(cfg, tr)
    plain, slow = simulate(cfg, tr, every_tick=True, trim=False)
    packed = [o for o in fast.p.orders.values() if o.order.loads]
    assert len(packed) > 10 and any(o.order.action == "return" for o in fast.p.orders.values())
    assert _moves(fast) == _moves(slow)
    assert _chosen(fast) == _chosen(slow)
    for key in ("planning_rounds", "facts"):
        shortcut.pop(key)
        plain.pop(key)
    assert shortcut == plain
    assert fast.rounds * 5 < slow.rounds


def test_a_host_past_its_max_lifetime_that_goes_idle_is_returned_then_by_both_ways():
    # The work ends with no change in the unmet need (none before, none after): no demand round comes,
    # and the hosts, held past their max_lifetime, are due the moment they are idle, not idle_time later.
    cfg = config(hosts("a", policy={"max_lifetime": "1h"}))
    tr = trace({"time": 0, "items": [batch(2)]}, {"time": 4200, "items": [{"id": "batch", "count": 0}]},
               {"time": 7200})
    _, fast = simulate(cfg, tr)
    _, slow = simulate(cfg, tr, every_tick=True, trim=False)
    returned = [m for m in _moves(slow) if m[2] == "return"]
    assert [(m[0] - slow.start, m[4]) for m in returned] == [(4200.0, 2)]
    assert _moves(fast) == _moves(slow)



def test_a_request_that_completes_during_a_cooldown_lets_the_need_be_ordered_then_by_both_ways():
    # One provider, half of its requests finding no capacity: at 601 s a request fails and its template
    # cools down; at 610 s an earlier request of the template completes, which clears the cooldown, and the
    # need left unplaced is ordered there at once (seed 17 makes this story).
    cfg = config(hosts("a", behaviour={"lead_time": {"min": 20, "max": 200}, "capacity_error_rate": 0.5}),
                 policy={"cooldown": "1m", "backoff_max": "8m"}, seed=17)
    steps = [{"time": 0, "items": [batch(2)]}]
    for k, want in enumerate([6, 0, 9, 1, 4, 0, 12, 3], start=1):
        steps.append({"time": k * 600, "items": [{"id": "batch", "count": want}]})
    tr = trace(*steps, {"time": 6000})
    _, fast = simulate(cfg, tr)
    _, slow = simulate(cfg, tr, every_tick=True, trim=False)
    cleared = [d for d in slow.p.decisions if d.at - slow.start == 610.0 and d.decision.chosen]
    assert cleared, "the story has a cooldown cleared by a completion, with need waiting"
    assert _moves(fast) == _moves(slow)


def _warm_story():
    """Warm capacity on a schedule (all providers together, and a floor at one template), with bursts that
    take the warm hosts, reclaims, a cap that refuses some, and a max_lifetime that makes successors."""
    cfg = config(
        hosts("dear", priority=20, price=2.0, max_number=6, min_hold_s=600,
              policy={"max_lifetime": "2h", "warm": [{"template": "dear-t", "min_hosts": 5,
                                                      "schedule": "01:00-03:30"}]},
              behaviour={"lead_time": {"min": 20, "max": 200}, "capacity_error_rate": 0.2}),
        hosts("spot", priority=10, price=0.3, behaviour={"lead_time": {"median": 90, "sigma": 0.5},
                                                         "reclaim_rate": 1.5}),
        policy={"idle_time": "4m", "cooldown": "1m", "backoff_max": "8m", "min_idle": 3,
                "warm_schedule": ["00:30-02:00", "02:45-04:00 Mon"], "timezone": "Europe/Paris"},
        budget={"max_hosts": 11},
    )
    steps = [{"time": 0, "items": [batch(2)]}]
    wants = [6, 0, 9, 1, 4, 0, 12, 3, 0, 5, 0, 2]
    for k, want in enumerate(wants, start=1):
        step = {"time": k * 900, "items": [{"id": "batch", "count": want}]}
        if k == 5:
            step["hosts"] = [{"provider": "spot", "event": "lost", "count": 2}]
        steps.append(step)
    steps.append({"time": (len(wants) + 2) * 900})
    return cfg, trace(*steps)


def test_with_warm_capacity_both_shortcuts_order_and_return_as_the_plain_way():
    cfg, tr = _warm_story()
    shortcut, fast = simulate(cfg, tr)
    plain, slow = simulate(cfg, tr, every_tick=True, trim=False)
    warm = [o for o in fast.p.orders.values() if o.order.item_id.startswith("warm/")]
    assert len(warm) > 5 and {o.order.item_id for o in warm} == {"warm/*", "warm/dear/dear-t"}
    assert _moves(fast) == _moves(slow)
    assert _chosen(fast) == _chosen(slow)
    for key in ("planning_rounds", "facts"):
        shortcut.pop(key)
        plain.pop(key)
    assert shortcut == plain
    assert fast.rounds * 5 < slow.rounds


def _warm_scopes_story():
    """Warm capacity at every scope at once (a floor over all providers, a provider's min_idle on a schedule and
    its floor, one template's min_idle on a Monday), with billing-unit returns, a rate limit, a cost cap,
    licenses, failures, reclaims and a failover."""
    cfg = config(
        hosts("dear", priority=20, price=2.0, max_number=4, min_hold_s=600,
              policy={"billing_unit": HOUR, "return_window": 600,
                      "warm": [{"min_idle": 2, "schedule": "00:20-01:40"}, {"min_hosts": 1}]},
              behaviour={"lead_time": {"min": 20, "max": 200}, "capacity_error_rate": 0.2}),
        hosts("spot", priority=10, price=0.3, behaviour={"lead_time": {"median": 90, "sigma": 0.5},
                                                         "reclaim_rate": 1.5, "fail_rate": 0.2},
              policy={"rate": {"count": 2, "per": "2m"},
                      "warm": [{"template": "spot-t", "min_idle": 3, "schedule": "01:00-02:30 Mon"}]}),
        hosts("slow", priority=10, price=0.9, ncpus=16, behaviour={"lead_time": 300, "transient_rate": 0.3}),
        units("lic", behaviour={"lead_time": {"min": 5, "max": 40}}),
        resources=[{"name": "vcs", "elastic": True, "base": 3, "provider": "lic"}],
        policy={"idle_time": "4m", "cooldown": "1m", "backoff_max": "8m", "min_hosts": 4,
                "warm_schedule": "00:00-03:00"},
        budget={"max_cost_per_hour": 25.0}, seed=6,
    )
    steps = [{"time": 0, "items": [batch(5), batch(2, item="big", ncpus=16),
                                   {"id": "l", "kind": "units", "resource": "vcs", "count": 6}]}]
    for k, want in enumerate([9, 3, 12, 0, 7, 2, 11, 4, 0, 6], start=1):
        step = {"time": k * 900, "items": [{"id": "batch", "count": want}, {"id": "l", "count": (k * 5) % 11}]}
        if k == 4:
            step["failover"] = ["spot"]
        if k == 6:
            step["hosts"] = [{"provider": "spot", "event": "lost", "count": 1}]
        steps.append(step)
    return cfg, trace(*steps, {"time": 12 * 900})


def test_with_warm_capacity_at_every_scope_both_shortcuts_order_and_return_as_the_plain_way():
    cfg, tr = _warm_scopes_story()
    shortcut, fast = simulate(cfg, tr)
    plain, slow = simulate(cfg, tr, every_tick=True, trim=False)
    assert {o.order.item_id for o in fast.p.orders.values() if o.order.item_id.startswith("warm/")} == {
        "warm/dear", "warm/spot/spot-t"}, "the floor over all providers is met by demand's hosts"
    assert any("idle kept from return" in d.decision.note for d in fast.p.decisions
               if d.decision.item == "warm/*")
    assert _moves(fast) == _moves(slow)
    assert _chosen(fast) == _chosen(slow)
    for key in ("planning_rounds", "facts"):
        shortcut.pop(key)
        plain.pop(key)
    assert shortcut == plain
