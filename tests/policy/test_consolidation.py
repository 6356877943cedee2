"""Consolidation: busy dear hosts drained through the scheduler and replaced by cheaper ones, each rule to its edge."""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from config.load import load_config
from config.located import ConfigError
from config.schedule import parse_schedule
from messages.description import Template
from messages.facts import InstanceChanged, InstanceSeen, Order, ProviderAdmin, RequestPlanned
from policy.budget import BudgetLimits
from policy.catalog import Catalog
from policy.consolidation import ConsolidationPolicy, drains, fits
from policy.rounds import outcome, propose
from policy.settings import PlanSettings, plan_settings
from state.projection import Projection
from tests.support.policy import T0, feed, hosts, idle_host

PARIS = ZoneInfo("Europe/Paris")
#: Monday 6 May 2024, 12:00 in Paris.
MONDAY_NOON = datetime(2024, 5, 6, 12, 0, tzinfo=PARIS).timestamp()
HOUR = 3600.0


def settings(**kw) -> PlanSettings:
    budget = kw.pop("budget", BudgetLimits())
    return PlanSettings(consolidation=ConsolidationPolicy(enabled=kw.pop("enabled", True), tz=PARIS, **kw),
                        budget=budget)


def world(big_hold: float = 0.0, cheap: dict | None = None, cls: type = Projection, **extra) -> Projection:
    """``big`` sells 8-CPU hosts at 1.0 an hour, ``cheap`` the same at 0.2."""
    p = cls()
    p.providers["big"] = hosts("big", price=1.0, min_hold_s=big_hold)
    p.providers["cheap"] = hosts("cheap", price=0.2, **(cheap or {}))
    for name, rec in extra.items():
        p.providers[name] = rec
    return p


def busy_host(p: Projection, machine: str, launched: float, provider: str = "big", template: str = "big-t",
              node: str = "") -> None:
    feed(p, provider, RequestPlanned(action="request", supply="hosts", template=template, count=1),
         now=launched, ids=[f"r-{machine}"])
    feed(p, provider, InstanceSeen(machine_id=machine, name=f"n-{machine}", request_id=f"r-{machine}",
                                   state="running", launched_at=launched, template=template, node=node),
         now=launched)
    feed(p, provider, InstanceChanged(kind="instance_busy", machine_id=machine, state="busy"), now=launched)


def round_(p: Projection, now: float, s: PlanSettings):
    return propose(None, p, now, s, idle_time=600, catalog=Catalog(p.providers))


def write(p: Projection, proposal, now: float, approved=None) -> list:
    """What the round writes (the budget review approving ``approved``, else every order), applied as facts."""
    payloads = outcome(proposal, proposal.orders if approved is None else approved, [], p.decided)
    for provider, payload in payloads:
        feed(p, provider, payload, now=now)
    return payloads


def summary(proposal) -> str:
    (d,) = [d for d in proposal.decisions if d.item == "consolidate"]
    return d.note


def moves(proposal) -> list[tuple[str, str, str]]:
    """(host drained, provider and template of its replacement), in the proposal's order."""
    drained = {o.item_id: f"{prov}/{o.machines[0]}" for prov, o in proposal.returns if o.when_idle}
    return [(drained[o.item_id], prov, o.template) for prov, o in proposal.orders if o.item_id in drained]


def test_a_busy_dear_host_is_drained_a_cheaper_one_ordered_and_the_decision_says_the_saving():
    p = world()
    busy_host(p, "m1", T0)
    out = round_(p, T0 + HOUR, settings())
    assert moves(out) == [("big/m1", "cheap", "cheap-t")]
    (_, drain), = out.returns
    assert drain.when_idle and drain.machines == ["m1"] and drain.item_id == "consolidate/big/m1"
    assert drain.reason == "consolidating to cheap/cheap-t: saves 0.8/h (1/h to 0.2/h)"
    d, whole = out.decisions
    assert d.item == "consolidate/big/m1" and d.saving_per_hour == 0.8
    assert (whole.item, whole.note) == ("consolidate", "consolidation: 1 moved; 1 draining, at most 1 at once")
    assert [(c.provider, c.template, c.count) for c in d.chosen] == [("cheap", "cheap-t", 1)]
    assert d.note == ("consolidating big/big-t host n-m1 (busy) to cheap/cheap-t: saves 0.8/h expected (1/h to "
                      "0.2/h); drained through the scheduler, returned once idle (1 draining, at most 1)")


def test_off_by_default_and_never_for_an_idle_host_a_named_nodes_host_or_one_with_nothing_cheaper():
    p = world()
    busy_host(p, "m1", T0)
    assert not moves(round_(p, T0 + HOUR, settings(enabled=False)))
    assert not moves(round_(p, T0 + HOUR, PlanSettings())), "the default settings consolidate nothing"
    q = world()
    idle_host(q, "big", "m1", "big-t", T0, T0 + 1)
    busy_host(q, "m2", T0, node="cloud2")
    busy_host(q, "m3", T0, provider="cheap", template="cheap-t")
    assert not round_(q, T0 + 60, settings(max_hosts=5)).orders, \
        "idle (reclaim's), a named node's (the scheduler's), the cheapest already"


def test_the_cheaper_template_without_room_moves_nothing_and_once_it_has_room_again_the_host_moves():
    p = world(cheap={"max_number": 1})
    busy_host(p, "m1", T0)
    busy_host(p, "c1", T0, provider="cheap", template="cheap-t")
    full = round_(p, T0 + HOUR, settings())
    assert not moves(full), "cheap is full: its one host is taken"
    assert summary(full) == ("consolidation: 0 draining, at most 1 at once; "
                             "no busy host has a cheaper template with room")
    feed(p, "cheap", InstanceChanged(kind="instance_lost", machine_id="c1", state="lost"), now=T0 + HOUR)
    feed(p, "cheap", ProviderAdmin(kind="provider_paused", reason="ops"), now=T0 + HOUR)
    assert not moves(round_(p, T0 + HOUR, settings())), "room, but paused"
    feed(p, "cheap", ProviderAdmin(kind="provider_resumed"), now=T0 + HOUR + 1)
    assert moves(round_(p, T0 + HOUR + 2, settings())) == [("big/m1", "cheap", "cheap-t")]


def test_never_before_the_hosts_min_hold_has_passed_and_from_that_second_on():
    p = world(big_hold=HOUR)
    busy_host(p, "m1", T0)
    early = round_(p, T0 + HOUR - 1, settings())
    assert not moves(early), "held 59:59 of a 1 h minimum hold"
    assert summary(early) == "consolidation: 0 draining, at most 1 at once; 1 before their min_hold"
    assert moves(round_(p, T0 + HOUR, settings())) == [("big/m1", "cheap", "cheap-t")]


def test_the_disruption_budget_counts_the_hosts_draining_already_until_they_are_back():
    p = world()
    for m in ("m1", "m2", "m3"):
        busy_host(p, m, T0)
    out = round_(p, T0 + HOUR, settings(max_hosts=2))
    assert [h for h, _, _ in moves(out)] == ["big/m1", "big/m2"], "two at once, not three"
    write(p, out, T0 + HOUR)
    assert sorted(drains(p.orders.values(), p.instances)) == ["big/m1", "big/m2"]
    spent = round_(p, T0 + HOUR + 5, settings(max_hosts=2))
    assert not moves(spent), "two draining: the budget is spent"
    assert summary(spent) == "consolidation: 2 draining, at most 2 at once; 1 held back by the disruption budget"
    assert [(d.need, d.in_flight) for d in spent.decisions] == [(1, 2)]
    feed(p, "big", InstanceChanged(kind="instance_lost", machine_id="m1", state="lost"), now=T0 + HOUR + 9)
    assert moves(round_(p, T0 + HOUR + 10, settings(max_hosts=2))) == [("big/m3", "cheap", "cheap-t")], \
        "one drained host gone: room for one more"


def test_an_operators_drain_counts_against_the_budget_too():
    p = world()
    busy_host(p, "m1", T0)
    busy_host(p, "m2", T0)
    feed(p, "big", Order(action="return", supply="hosts", machines=["m1"], count=1, when_idle=True,
                         reason="operator: AZ maintenance"), now=T0 + 1)
    assert drains(p.orders.values(), p.instances) == {"big/m1": "operator: AZ maintenance"}
    assert not moves(round_(p, T0 + HOUR, settings(max_hosts=1)))
    assert moves(round_(p, T0 + HOUR, settings(max_hosts=2))) == [("big/m2", "cheap", "cheap-t")]


def test_max_percent_of_the_hosts_up_rounded_up_and_the_tighter_of_the_two_caps_holds():
    p = world()
    for m in ("m1", "m2", "m3", "m4"):
        busy_host(p, m, T0)
    n = lambda **kw: len(moves(round_(p, T0 + HOUR, settings(**kw))))  # noqa: E731
    assert n(max_hosts=None, max_percent=50) == 2, "50 % of 4"
    assert n(max_hosts=None, max_percent=10) == 1, "10 % of 4 rounds up to one"
    assert n(max_hosts=None, max_percent=75) == 3
    assert n(max_hosts=1, max_percent=75) == 1, "the count cap is tighter"
    assert n(max_hosts=0) == 0


def test_nothing_during_a_never_window_to_the_second_in_the_config_time_zone():
    p = world()
    busy_host(p, "m1", T0)
    s = settings(never_during=parse_schedule("08:00-20:00 Mon-Fri"))
    at = lambda h, m=0, sec=0: datetime(2024, 5, 6, h, m, sec, tzinfo=PARIS).timestamp()  # noqa: E731
    assert moves(round_(p, at(7, 59, 59), s)), "Monday 07:59:59 in Paris: outside"
    closed = round_(p, at(8), s)
    assert not moves(closed), "08:00:00: the window opens"
    assert summary(closed) == "consolidation: 0 draining, at most 1 at once; 1 not during 08:00-20:00 Mon-Fri"
    assert not moves(round_(p, at(19, 59, 59), s))
    assert moves(round_(p, at(20), s)), "20:00:00: it closed"


def test_the_replacement_offers_what_the_host_does_and_costs_at_least_min_saving_less():
    assert fits({"ncpus": 8, "type": "X86_64", "gpu": True}, {"ncpus": 16, "type": "X86_64", "gpu": True})
    assert not fits({"ncpus": 8}, {"ncpus": 4}), "smaller"
    assert not fits({"type": "X86_64"}, {"type": "ARM64"})
    assert not fits({"gpu": True}, {}), "a flag it lacks"
    assert fits({"gpu": False}, {})
    assert fits({"ncpus": 8, "capacity_type": "on-demand"}, {"ncpus": 8, "capacity_type": "spot"}), \
        "on-demand may become spot"
    small = hosts("small", price=0.1, ncpus=4)
    p = world(small=small)
    busy_host(p, "m1", T0)
    assert moves(round_(p, T0, settings())) == [("big/m1", "cheap", "cheap-t")], "not the 4-CPU one, cheaper as it is"
    p = world(cheap={"templates": [Template(id="cheap-t", max_number=5, cost_per_hour=0.9,
                                            attributes={"ncpus": 8, "type": "X86_64"})]})
    busy_host(p, "m1", T0)
    assert moves(round_(p, T0, settings(min_saving=0.1))), "0.9 against 1.0 saves 10 %: enough"
    assert not moves(round_(p, T0, settings(min_saving=0.11))), "not 11 %"


def test_a_replacement_cut_by_the_budget_review_takes_its_drain_with_it():
    p = world()
    busy_host(p, "m1", T0)
    out = round_(p, T0 + HOUR, settings())
    written = write(p, out, T0 + HOUR, approved=[])
    assert not [x for _, x in written if x.kind == "order"], "no replacement, so no drain"
    assert not drains(p.orders.values(), p.instances)


def test_the_global_caps_leave_no_room_for_a_replacement_nothing_moves():
    p = world()
    busy_host(p, "m1", T0)
    assert not moves(round_(p, T0 + HOUR, settings(budget=BudgetLimits(max_hosts=1))))


def test_a_planned_drain_survives_a_restart_and_is_not_planned_again():
    p = world(cls=Recorded)
    busy_host(p, "m1", T0)
    write(p, round_(p, T0 + HOUR, settings()), T0 + HOUR)
    restarted = world()  # a restarted daemon: the same descriptions, the same facts replayed
    restarted.apply_all(p.log)
    assert drains(restarted.orders.values(), restarted.instances) == {
        "big/m1": "consolidating to cheap/cheap-t: saves 0.8/h (1/h to 0.2/h)"}
    assert not moves(round_(restarted, T0 + HOUR + 60, settings(max_hosts=5))), \
        "the host drains already; its replacement is on its way"


class Recorded(Projection):
    """A projection that keeps the facts it was fed, for a restart to replay."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list = []

    def apply(self, fact) -> bool:
        self.log.append(fact)
        return super().apply(fact)


def write_config(tmp_path: Path, consolidation: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent("""\
        instance: {id: a}
        controller: {url: "sqlite:///x.db"}
        policy:
          timezone: Europe/Paris
          consolidation:
        """) + textwrap.indent(textwrap.dedent(consolidation), "    "))
    return path


def test_the_config_gives_the_planner_its_consolidation_and_bad_keys_are_named(tmp_path: Path):
    cfg = load_config(write_config(tmp_path, """\
        enabled: true
        max_hosts: 2
        max_percent: 10
        never_during: 08:00-20:00 Mon-Fri
        min_saving: 0.2
        """), check_files=False)
    c = plan_settings(cfg.policy).consolidation
    assert (c.enabled, c.max_hosts, c.max_percent, str(c.never_during), c.min_saving, c.tz) == (
        True, 2, 10, "08:00-20:00 Mon-Fri", 0.2, PARIS)
    assert not plan_settings(load_config(write_config(tmp_path, "{}"), check_files=False).policy).consolidation.enabled
    path = write_config(tmp_path, """\
        enabled: true
        max_hosts: null
        never_during: 8-20
        min_saving: 1
        """)
    with pytest.raises(ConfigError) as info:
        load_config(path, check_files=False)
    said = [str(i) for i in info.value.issues]
    assert any("policy.consolidation.never_during: not a schedule window: '8-20'" in s for s in said), said
    assert any("policy.consolidation.min_saving" in s for s in said), said
    path = write_config(tmp_path, "enabled: true\nmax_hosts: null\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, check_files=False)
    assert any("policy.consolidation: " in str(i) and "needs a disruption budget" in str(i)
               for i in info.value.issues), [str(i) for i in info.value.issues]


def test_the_rounds_summary_is_written_when_it_changes_not_every_round():
    p = world(big_hold=HOUR)
    busy_host(p, "m1", T0)
    first = write(p, round_(p, T0 + 10, settings()), T0 + 10)
    assert [x.note for _, x in first if x.kind == "decision"] == [
        "consolidation: 0 draining, at most 1 at once; 1 before their min_hold"]
    assert not write(p, round_(p, T0 + 20, settings()), T0 + 20), "the same words: nothing written"
    moved = write(p, round_(p, T0 + HOUR, settings()), T0 + HOUR)
    assert [x.item for _, x in moved if x.kind == "decision"] == ["consolidate/big/m1", "consolidate"]


def test_an_idle_replacement_is_kept_while_the_host_it_stands_in_for_drains_then_goes_back_as_any():
    p = world()
    busy_host(p, "m1", T0)
    write(p, round_(p, T0 + HOUR, settings()), T0 + HOUR)
    (order,) = [o for o in p.orders.values() if o.provider == "cheap"]
    feed(p, "cheap", RequestPlanned(action="request", supply="hosts", order_id=order.id, item_id=order.order.item_id,
                                    template="cheap-t", count=1), now=T0 + HOUR, ids=["r-c1"])
    feed(p, "cheap", InstanceSeen(machine_id="c1", name="n-c1", request_id="r-c1", state="running",
                                  launched_at=T0 + HOUR, template="cheap-t"),
         InstanceChanged(kind="instance_joined", machine_id="c1", state="joined"),
         InstanceChanged(kind="instance_idle", machine_id="c1", state="idle"), now=T0 + HOUR + 60)
    later = T0 + 2 * HOUR  # the replacement idle for most of an hour, past idle_time; no demand
    assert not [o for _, o in round_(p, later, settings()).returns if "c1" in o.machines], \
        "kept: its old host still drains"
    assert [o.machines for _, o in round_(p, later, settings(enabled=False)).returns if not o.when_idle] == [], \
        "kept with consolidation turned off too, while the drain it was made for stands"
    feed(p, "big", InstanceChanged(kind="instance_idle", machine_id="m1", state="idle"), now=later)
    feed(p, "big", InstanceChanged(kind="instance_return_planned", machine_id="m1", state="return_planned"),
         now=later)
    assert [o.machines for _, o in round_(p, later + 700, settings()).returns] == [["c1"]], \
        "the old host on its way back: the replacement idles as any host"
