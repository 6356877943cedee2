"""A kept catalog gives an item's last decision again when a round weighs the item as the last one did,
and never when anything in it would differ."""

from __future__ import annotations

from messages.demand import HostItem, UnitItem
from messages.facts import Order
from policy.catalog import Catalog
from policy.planning import PlanSettings, plan
from state.projection import Projection
from tests.support.policy import T0, demand, failed_request, feed, hosts, units, view

SETTINGS = PlanSettings(cooldown=60, join_grace=30, order_timeout=600)


def _providers() -> dict:
    return {"a": hosts("a", priority=9, max_number=2), "b": hosts("b"), "c": hosts("c", ncpus=2),
            "lic": units("lic", capacity=3)}


def _dump(out) -> tuple:
    return ([d.model_dump() for d in out.decisions], [(p, o.model_dump()) for p, o in out.orders],
            [(u.item, u.count, u.reason) for u in out.unplaced])


def test_a_round_that_decides_as_the_last_gives_the_same_decisions_and_orders():
    provs = _providers()
    wanted = demand(HostItem(id="d", count=5, select={"ncpus": ">=8"}), UnitItem(id="u", count=4, resource="vcs"))
    catalog = Catalog(provs)
    first = plan(wanted, provs, view(Projection()), T0, SETTINGS, catalog)
    again = plan(wanted, provs, view(Projection()), T0 + 1, SETTINGS, catalog)
    assert all(x is y for x, y in zip(first.decisions, again.decisions))
    assert [o for _, o in again.orders] == [o for _, o in first.orders]
    assert _dump(again) == _dump(first)


def test_a_new_snapshot_asking_the_same_gets_the_decision_with_its_own_seq():
    provs = _providers()
    catalog = Catalog(provs)
    item = HostItem(id="d", count=5, select={"ncpus": ">=8"})
    plan(demand(item, seq=1), provs, view(Projection()), T0, SETTINGS, catalog)
    later = plan(demand(item, seq=2), provs, view(Projection()), T0, SETTINGS, catalog)
    fresh = plan(demand(item, seq=2), provs, view(Projection()), T0, SETTINGS)
    assert later.decisions[0].demand_seq == 2
    assert _dump(later) == _dump(fresh)


def test_a_kept_catalog_decides_as_a_fresh_one_when_supply_or_demand_changes():
    provs = _providers()
    catalog = Catalog(provs)
    items = [HostItem(id="d", count=5, select={"ncpus": ">=8"}), HostItem(id="e", count=3),
             UnitItem(id="u", count=4, resource="vcs")]
    plan(demand(*items), provs, view(Projection()), T0, SETTINGS, catalog)
    p = Projection()
    failed_request(p, "a", "a-t", "r1", at=T0 - 10)  # a cools down: the need goes elsewhere
    feed(p, "b", Order(action="request", supply="hosts", item_id="d", template="b-t", count=2), now=T0 - 5)
    for now, wanted in ((T0, demand(*items)), (T0, demand(items[0], HostItem(id="e", count=9), items[2])),
                        (T0 + 3600, demand(*items, seq=2))):
        kept = plan(wanted, provs, view(p), now, SETTINGS, catalog)
        assert _dump(kept) == _dump(plan(wanted, provs, view(p), now, SETTINGS))
