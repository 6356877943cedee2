"""Warm capacity: hosts kept idle beyond demand, a floor never returned, on a schedule, inside every limit."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from config.schedule import parse_schedule
from messages.demand import HostItem
from messages.description import Template
from messages.facts import InstanceChanged, InstanceSeen, NodesChanged, Order, RequestPlanned
from policy.budget import BudgetLimits
from policy.catalog import Catalog
from policy.due import next_change
from policy.limits import ProviderLimits
from policy.rounds import dry_run, propose
from policy.settings import PlanSettings
from policy.warm import WarmPolicy, WarmRule
from state.projection import Projection
from tests.support.policy import T0, demand, failed_request, feed, hosts, idle_host

PARIS = ZoneInfo("Europe/Paris")
#: Monday 6 May 2024, 08:00 in Paris.
MONDAY_8 = datetime(2024, 5, 6, 8, 0, tzinfo=PARIS).timestamp()
IDLE = 600


def settings(*rules: WarmRule, tz=PARIS, **kw) -> PlanSettings:
    return PlanSettings(warm=WarmPolicy(rules=rules, tz=tz), **kw)


def world(**providers) -> Projection:
    p = Projection()
    for name, rec in (providers or {"a": hosts("a")}).items():
        p.providers[name] = rec
    return p


def round_(p: Projection, now: float, s: PlanSettings, wanted=None):
    return propose(wanted, p, now, s, idle_time=IDLE, catalog=Catalog(p.providers))


def warm_orders(proposal) -> list[tuple[str, str | None, int]]:
    return [(prov, o.template, o.count) for prov, o in proposal.orders if o.item_id.startswith("warm/")]


def returned(proposal) -> list[str]:
    return sorted(m for _, o in proposal.returns for m in o.machines)


def decision(proposal, item: str):
    return next(d for d in proposal.decisions if d.item == item)


def busy_host(p: Projection, provider: str, machine: str, template: str, launched: float) -> None:
    feed(p, provider, RequestPlanned(action="request", supply="hosts", template=template, count=1),
         now=launched, ids=[f"r-{machine}"])
    feed(p, provider, InstanceSeen(machine_id=machine, name=f"n-{machine}", request_id=f"r-{machine}",
                                   state="running", launched_at=launched, template=template), now=launched)
    feed(p, provider, InstanceChanged(kind="instance_busy", machine_id=machine, state="busy"), now=launched)


# --- min_idle: hosts beyond demand ------------------------------------------------------------------


def test_min_idle_orders_hosts_with_no_demand_at_all_and_the_decision_says_kept_warm():
    p = world()
    out = round_(p, T0, settings(WarmRule(provider=None, template=None, min_idle=2)))
    assert warm_orders(out) == [("a", "a-t", 2)]
    (_, order), = out.orders
    assert order.item_id == "warm/*" and order.reason == "kept warm: min_idle 2: 2 more wanted"
    d = decision(out, "warm/*")
    assert (d.need, d.in_flight, [(c.provider, c.count) for c in d.chosen]) == (2, 0, [("a", 2)])
    assert d.note == "kept warm: min_idle 2: 0 ready, 0 held, 0 coming"


def test_min_idle_is_beyond_demand_the_demand_is_ordered_first_and_warm_hosts_on_top():
    p = world()
    out = round_(p, T0, settings(WarmRule(provider="a", template=None, min_idle=2)),
                 demand(HostItem(id="batch", count=5)))
    assert [(o.item_id, o.count) for _, o in out.orders] == [("batch", 5), ("warm/a", 2)]


def test_idle_hosts_and_warm_hosts_on_their_way_count_busy_ones_and_demands_do_not():
    p = world()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 10)
    busy_host(p, "a", "m2", "a-t", launched=T0)
    rule = WarmRule(provider="a", template=None, min_idle=3)
    out = round_(p, T0 + 20, settings(rule))
    assert warm_orders(out) == [("a", "a-t", 2)], "one idle host is ready; the busy one is not"
    feed(p, "a", out.orders[0][1], now=T0 + 20, ids=["o-warm"])
    again = round_(p, T0 + 25, settings(rule))
    assert warm_orders(again) == [] and decision(again, "warm/a").in_flight == 2
    assert decision(again, "warm/a").note == "kept warm: min_idle 3: 1 ready, 4 held, 2 coming, 1 idle kept from return"


def test_a_warm_host_taken_by_work_is_replaced():
    p = world()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 10)
    rule = WarmRule(provider="a", template=None, min_idle=1)
    assert warm_orders(round_(p, T0 + 20, settings(rule))) == []
    feed(p, "a", InstanceChanged(kind="instance_busy", machine_id="m1", state="busy"), now=T0 + 30)
    assert warm_orders(round_(p, T0 + 30, settings(rule))) == [("a", "a-t", 1)]


# --- inside the same limits ----------------------------------------------------------------------


def test_warm_hosts_take_only_the_room_demand_left_under_a_cap_and_say_what_stopped_them():
    p = world()
    s = settings(WarmRule(provider=None, template=None, min_idle=3), budget=BudgetLimits(max_hosts=6))
    out = round_(p, T0, s, demand(HostItem(id="batch", count=4)))
    assert [(o.item_id, o.count) for _, o in out.orders] == [("batch", 4), ("warm/*", 2)]
    d = decision(out, "warm/*")
    assert [(c.provider, c.count, c.why) for c in d.candidates] == [("a", 2, "budget: max_hosts")]
    assert d.note == "kept warm: min_idle 3: 0 ready, 4 held, 0 coming; 1 could not be placed"
    full = round_(p, T0, s, demand(HostItem(id="batch", count=6)))
    assert warm_orders(full) == [], "demand comes first: it took all the room"


def test_warm_hosts_spill_to_the_next_provider_as_demand_does_and_respect_its_caps():
    p = world(a=hosts("a", priority=9, max_number=1), b=hosts("b"))
    s = settings(WarmRule(provider=None, template=None, min_idle=3),
                 providers={"b": ProviderLimits(max_cost_per_hour=1.0)})
    out = round_(p, T0, s)
    assert warm_orders(out) == [("a", "a-t", 1), ("b", "b-t", 1)]
    assert [(c.provider, c.why) for c in decision(out, "warm/*").candidates] == [
        ("a", "capacity: room for 1"), ("b", "budget: provider max_cost_per_hour 1")]


def test_the_budget_review_cuts_warm_orders_and_their_cost_counts_like_any_hosts():
    p = world(a=hosts("a", price=2.0))
    s = settings(WarmRule(provider="a", template=None, min_idle=3), budget=BudgetLimits(max_cost_per_hour=4.0))
    run = dry_run(None, p, T0, s)
    assert [(o.item_id, o.count) for _, o in run.orders] == [("warm/a", 2)]
    assert run.cost_per_hour == 4.0
    assert [(u.item, u.count) for u in run.unplaced] == [("warm/a", 1)]
    # A warm order on its way holds room as any order does: demand finds that much less.
    feed(p, "a", run.orders[0][1], now=T0, ids=["o-warm"])
    out = round_(p, T0 + 5, s, demand(HostItem(id="batch", count=3)))
    assert [(o.item_id, o.count) for _, o in out.orders] == [], "the cost cap is used up by the warm hosts"
    assert decision(out, "batch").rejected[0].reason == "budget: max_cost_per_hour"


def test_a_paused_provider_takes_no_warm_host_but_keeps_its_own_and_a_drained_one_keeps_none():
    p = world()
    p.providers["a"].status = "paused"
    rule = WarmRule(provider="a", template=None, min_idle=1, min_hosts=1)
    out = round_(p, T0, settings(rule))
    assert warm_orders(out) == [] and decision(out, "warm/a").rejected[0].reason == "paused"
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 1)
    assert returned(round_(p, T0 + 2 * IDLE, settings(rule))) == [], "a paused provider's host is kept warm"
    p.providers["a"].status = "drained"
    assert returned(round_(p, T0 + 2 * IDLE, settings(rule))) == ["m1"], "a drained one is given back"


def test_a_template_scope_orders_that_template_and_an_unknown_one_says_so():
    two = [Template(id="small", max_number=10, attributes={"ncpus": 2}, cost_per_hour=0.1),
           Template(id="big", max_number=10, attributes={"ncpus": 32}, cost_per_hour=1.0)]
    p = world(a=hosts("a", templates=two))
    out = round_(p, T0, settings(WarmRule(provider="a", template="big", min_idle=1),
                                 WarmRule(provider="a", template=None, min_idle=2)))
    assert warm_orders(out) == [("a", "big", 1), ("a", "small", 1)], \
        "the template's rule first; the provider's counts its host and orders its first-ranked template"
    odd = round_(p, T0, settings(WarmRule(provider="a", template="huge", min_hosts=1)))
    assert decision(odd, "warm/a/huge").note.endswith(
        "1 could not be placed (a: no template named huge (it has small, big))")


def test_rules_of_one_scope_open_at_once_ask_for_the_largest_of_each():
    p = world()
    out = round_(p, T0, settings(WarmRule(provider="a", template=None, min_idle=1, min_hosts=4),
                                 WarmRule(provider="a", template=None, min_idle=3)))
    assert warm_orders(out) == [("a", "a-t", 4)]
    assert decision(out, "warm/a").note.startswith("kept warm: min_idle 1 min_hosts 4, min_idle 3: ")


# --- the return side ----------------------------------------------------------------------------


def test_min_hosts_is_a_floor_never_returned_and_hosts_above_it_go_back():
    p = world()
    for k in range(3):
        idle_host(p, "a", f"m{k}", "a-t", launched=T0 + k, idle_at=T0 + 10)
    rule = WarmRule(provider="a", template=None, min_hosts=2)
    out = round_(p, T0 + 10 + IDLE, settings(rule))
    assert returned(out) == ["m0"], "the oldest goes; the two youngest are the floor"
    assert warm_orders(out) == []
    assert decision(out, "warm/a").note == "kept warm: min_hosts 2: 3 ready, 3 held, 0 coming, 2 idle kept from return"
    feed(p, "a", out.returns[0][1], now=T0 + 10 + IDLE, ids=["o-back"])
    assert returned(round_(p, T0 + 100 * IDLE, settings(rule))) == [], "the floor stays, however long it idles"


def test_busy_hosts_stand_for_the_floor_so_idle_ones_above_it_go_back():
    p = world()
    busy_host(p, "a", "b1", "a-t", launched=T0)
    busy_host(p, "a", "b2", "a-t", launched=T0)
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 10)
    assert returned(round_(p, T0 + 10 + IDLE, settings(WarmRule(provider="a", template=None, min_hosts=2)))) \
        == ["m1"]
    assert returned(round_(p, T0 + 10 + IDLE, settings(WarmRule(provider="a", template=None, min_hosts=3)))) \
        == []


def test_min_idle_keeps_that_many_idle_hosts_and_no_more():
    p = world()
    for k in range(4):
        idle_host(p, "a", f"m{k}", "a-t", launched=T0 + k, idle_at=T0 + 10)
    out = round_(p, T0 + 10 + IDLE, settings(WarmRule(provider=None, template=None, min_idle=1)))
    assert returned(out) == ["m0", "m1", "m2"]


def test_min_idle_keeps_the_youngest_idle_hosts_even_when_an_older_one_just_went_idle():
    # Two young hosts idle long (due), two old ones idle just now (not due): a scheduler that holds the youngest
    # ready for warm capacity (the Slurm bridge does) must not see them given back while the old ones stay.
    p = world()
    idle_host(p, "a", "young1", "a-t", launched=T0 + 50, idle_at=T0 + 60)
    idle_host(p, "a", "young2", "a-t", launched=T0 + 51, idle_at=T0 + 60)
    idle_host(p, "a", "old1", "a-t", launched=T0, idle_at=T0 + 60 + IDLE)
    idle_host(p, "a", "old2", "a-t", launched=T0 + 1, idle_at=T0 + 60 + IDLE)
    s = settings(WarmRule(provider=None, template=None, min_idle=2))
    assert returned(round_(p, T0 + 60 + IDLE, s)) == [], "the young two kept; the old two not due yet"
    assert returned(round_(p, T0 + 60 + 2 * IDLE, s)) == ["old1", "old2"], "the old two go once due"


def test_a_host_past_its_max_lifetime_stands_in_until_its_successor_is_ordered():
    p = world()
    idle_host(p, "a", "old", "a-t", launched=T0, idle_at=T0 + 10)
    s = settings(WarmRule(provider="a", template=None, min_hosts=1), providers={"a": ProviderLimits(max_lifetime=3600)})
    out = round_(p, T0 + 3600, s)
    assert warm_orders(out) == [("a", "a-t", 1)] and returned(out) == [], "its successor ordered; it stays meanwhile"
    feed(p, "a", out.orders[0][1], now=T0 + 3600, ids=["o-next"])
    assert returned(round_(p, T0 + 3605, s)) == ["old"], "the successor is on its way: it goes"


def test_a_named_nodes_host_counts_for_no_rule():
    p = world()
    feed(p, "a", NodesChanged(kind="nodes_resumed", names=["cloud1"], template="a-t"), now=T0)
    feed(p, "a", Order(action="request", supply="hosts", item_id="nodes/a/a-t", template="a-t", count=1,
                       names=["cloud1"]), now=T0, ids=["o-node"])
    out = round_(p, T0 + 1, settings(WarmRule(provider="a", template=None, min_hosts=1)))
    assert warm_orders(out) == [("a", "a-t", 1)]


# --- schedules ---------------------------------------------------------------------------------


def test_a_schedule_opens_at_its_first_minute_and_closes_at_its_last_exactly_in_the_config_time_zone():
    rule = WarmRule(provider="a", template=None, min_idle=2, schedule=parse_schedule("08:00-20:00 Mon-Fri"))
    p = world()

    def ordered(t: float) -> int:
        return sum(n for _, _, n in warm_orders(round_(p, t, settings(rule))))

    assert ordered(MONDAY_8 - 1) == 0, "07:59:59 Monday"
    assert ordered(MONDAY_8) == 2, "08:00:00 Monday"
    assert ordered(MONDAY_8 + 12 * 3600 - 1) == 2, "19:59:59"
    assert ordered(MONDAY_8 + 12 * 3600) == 0, "20:00:00"
    assert ordered(MONDAY_8 + 5 * 86400 + 3600) == 0, "Saturday 09:00: a day outside"
    closed = round_(p, MONDAY_8 - 1, settings(rule))
    assert decision(closed, "warm/a").note == "kept warm: nothing now (outside 08:00-20:00 Mon-Fri)"
    in_utc = round_(p, MONDAY_8 + 3600, settings(rule, tz=ZoneInfo("UTC")))
    assert ordered(MONDAY_8 + 3600) == 2 and in_utc.orders == [], "09:00 in Paris is 07:00 UTC"


def test_hosts_kept_by_a_schedule_go_back_once_it_closes():
    p = world()
    idle_host(p, "a", "m1", "a-t", launched=MONDAY_8, idle_at=MONDAY_8 + 10)
    rule = WarmRule(provider="a", template=None, min_hosts=1, schedule=parse_schedule("08:00-20:00 Mon-Fri"))
    assert returned(round_(p, MONDAY_8 + 12 * 3600 - 1, settings(rule))) == []
    assert returned(round_(p, MONDAY_8 + 12 * 3600, settings(rule))) == ["m1"]


def test_the_moment_a_schedule_opens_or_closes_is_when_a_round_is_due():
    p = world()
    rule = WarmRule(provider="a", template=None, min_idle=1, schedule=parse_schedule("08:00-20:00 Mon-Fri"))
    s = settings(rule)
    assert next_change(None, p, MONDAY_8 - 600, s, IDLE, []) == MONDAY_8
    assert next_change(None, p, MONDAY_8 + 60, s, IDLE, []) == MONDAY_8 + 12 * 3600
    friday_close = MONDAY_8 + 4 * 86400 + 12 * 3600
    assert next_change(None, p, friday_close, s, IDLE, []) == MONDAY_8 + 7 * 86400, "over the weekend"


def test_a_warm_lack_left_unplaced_by_a_cooldown_is_looked_at_again_when_the_cooldown_ends():
    p = world()
    failed_request(p, "a", "a-t", "r1", at=T0)
    s = settings(WarmRule(provider="a", template=None, min_idle=1), cooldown=120)
    out = round_(p, T0 + 1, s)
    d = decision(out, "warm/a")
    assert (d.need, d.chosen) == (1, []) and d.rejected[0].reason.startswith("cooling down until ")
    assert next_change(None, p, T0 + 1, s, IDLE, out.decisions) == T0 + 120
