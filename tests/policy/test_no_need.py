"""A decision that needs nothing says why: nothing asked, or covered by what is coming (issue 20, item 3)."""

from __future__ import annotations

from messages.demand import BundleItem, HostItem
from messages.facts import Order
from policy.planning import PlanSettings, plan
from state.projection import Projection
from tests.support.policy import T0, demand, feed, hosts, view

SETTINGS = PlanSettings(cooldown=60, join_grace=30, order_timeout=600)


def test_no_need_when_nothing_is_asked_and_nothing_is_in_flight():
    provs = {"a": hosts("a")}
    out = plan(demand(HostItem(id="d", count=0), BundleItem(id="b", count=0, resources={"ncpus": 1})),
               provs, view(Projection()), T0, SETTINGS)
    assert [d.note for d in out.decisions] == ["no need", "no need"]
    assert all(not d.rejected for d in out.decisions), "a decision that needs nothing names no candidates"
    p = Projection()
    feed(p, "a", Order(action="request", supply="hosts", item_id="d", template="a-t", count=2), ids=["o1"])
    again = plan(demand(HostItem(id="d", count=2)), provs, view(p), T0, SETTINGS)
    assert again.decisions[0].note == "in-flight supply covers the need"
