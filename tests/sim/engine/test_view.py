"""The trimmed view keeps what in-flight bundles are read from: a packed order while its request may bring hosts."""

from __future__ import annotations

from messages.facts import InstanceChanged, InstanceSeen, Load, Order, RequestChanged, RequestPlanned, make_fact
from policy.rounds import supply_view
from policy.settings import PlanSettings
from policy.supply import bundles_in_flight
from sim.view import Recent, horizon
from state.projection import Projection

T0 = 1_700_000_000.0
SETTINGS = PlanSettings(join_grace=60, order_timeout=900)


class World:
    """A projection and the trimmed view of it, fed the same facts."""

    def __init__(self) -> None:
        self.p = Projection()
        self.view = Recent(self.p, SETTINGS)

    def feed(self, at: float, *payloads, ids: tuple[str, ...] = ()) -> None:
        for k, payload in enumerate(payloads):
            fact = make_fact(payload, provider="a", now=at, fact_id=ids[k] if k < len(ids) else None)
            assert self.p.apply(fact.model_copy(update={"seq": self.p.seq + 1}))
            self.view.add(fact)

    def flying(self, now: float) -> tuple[dict[str, int], dict[str, int]]:
        """Bundles in flight per item, on the whole projection and on the view after a trim at ``now``."""
        self.view.retire(now)
        count = lambda state: bundles_in_flight(supply_view(state), now, SETTINGS.join_grace,  # noqa: E731
                                                SETTINGS.order_timeout)
        return count(self.p), count(self.view)


def test_a_packed_order_stays_in_view_while_its_request_may_still_bring_hosts():
    w = World()
    w.feed(T0, Order(action="request", supply="hosts", template="t", count=2,
                     loads=[Load(hosts=2, bundles={"j": 4})]), ids=("o1",))
    w.feed(T0, RequestPlanned(action="request", supply="hosts", order_id="o1", template="t", count=2), ids=("r1",))
    w.feed(T0 + 1, RequestChanged(kind="request_submitted", request_id="r1", state="submitted"))
    # The request is slow: long after the order, its hosts still carry all 8 bundles.
    whole, trimmed = w.flying(T0 + 2 * horizon(SETTINGS))
    assert whole == trimmed == {"j": 8}
    assert "o1" in w.view.orders
    t = T0 + 2 * horizon(SETTINGS) + 10
    w.feed(t, InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="running", template="t"),
           InstanceSeen(machine_id="m2", name="n2", request_id="r1", state="running", template="t"),
           RequestChanged(kind="request_completed", request_id="r1", state="complete"))
    w.feed(t + 20, InstanceChanged(kind="instance_joined", machine_id="m1", state="joined"))
    whole, trimmed = w.flying(t + 30)
    assert whole == trimmed == {"j": 8}, "one host joined within the grace, one still coming up"
    # Long after the request completed, its second host is still coming up: it carries its share.
    late = t + 2 * horizon(SETTINGS)
    whole, trimmed = w.flying(late)
    assert whole == trimmed == {"j": 4}
    w.feed(late + 10, InstanceChanged(kind="instance_joined", machine_id="m2", state="joined"))
    whole, trimmed = w.flying(late + 20)
    assert whole == trimmed == {"j": 4}, "joined within the grace"
    whole, trimmed = w.flying(late + 100 + horizon(SETTINGS))
    assert whole == trimmed == {}
    assert "o1" not in w.view.orders and "r1" not in w.view.requests, "once nothing rides on it, it goes"
