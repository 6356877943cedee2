"""A drained host goes back once its work ends; an operator's return takes a busy host at once."""

from __future__ import annotations

from messages.facts import InstanceChanged, InstanceSeen, Order
from owner.requests import take_order
from tests.support.facts import T0, commit, kinds, projection

BUSY = [(None, InstanceSeen(machine_id="b", name="b", state="running")),
        (None, InstanceChanged(kind="instance_busy", machine_id="b", state="busy"))]


def test_a_drain_waits_for_the_busy_host_to_fall_idle_then_returns_it(hosts):
    drain = ("o", Order(action="return", supply="hosts", machines=["b"], count=1, when_idle=True,
                        reason="operator: AZ maintenance (by ops)"))
    p = projection("p", [*BUSY, drain])
    assert not take_order(p, hosts, p.orders["o"], T0 + 9, busy=()), "busy: not yet"
    commit(p, "p", _idle(), T0 + 10)
    (w,) = take_order(p, hosts, p.orders["o"], T0 + 11, busy=()).writes
    assert w.payloads[0].machines == ["b"] and kinds(w.payloads[1:]) == ["instance_return_planned"]


def test_an_operators_return_takes_the_busy_host_at_once(hosts):
    forced = ("o", Order(action="return", supply="hosts", machines=["b"], count=1,
                         reason="operator: bad image (by ops)"))
    p = projection("p", [*BUSY, forced])
    (w,) = take_order(p, hosts, p.orders["o"], T0 + 9, busy=()).writes
    assert w.payloads[0].machines == ["b"]


def _idle():
    from owner.effects import Notes, write

    return write(Notes("host-events"), [InstanceChanged(kind="instance_idle", machine_id="b", state="idle")])
