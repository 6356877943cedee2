"""The instances view names the scheduler's node of a host made for one, beside the provider's name."""

from __future__ import annotations

from messages.facts import InstanceSeen, NodesChanged
from provisioner.api.models import InstanceRow
from provisioner.read import views
from state.projection import Projection
from tests.support.policy import T0, feed, hosts


def test_a_host_made_for_a_named_node_shows_its_node_and_its_own_name():
    p = Projection()
    p.providers["aws"] = hosts("aws")
    feed(p, "aws", NodesChanged(kind="nodes_resumed", names=["cloud1"], template="aws-t"), now=T0)
    feed(p, "aws", InstanceSeen(machine_id="i-1", name="ip-10-0-0-9", node="cloud1", state="running"),
         InstanceSeen(machine_id="i-2", name="plain", state="running"), now=T0 + 1)
    rows = {r["machine_id"]: r for r in views.instances(p, T0 + 2)}
    assert (rows["i-1"]["name"], rows["i-1"]["node"]) == ("ip-10-0-0-9", "cloud1")
    assert rows["i-2"]["node"] == ""
    assert InstanceRow.model_validate(rows["i-1"]).node == "cloud1"


def test_a_host_asked_to_drain_says_so_with_the_reason_until_it_is_on_its_way_back():
    from messages.facts import InstanceChanged, Order, RequestPlanned

    p = Projection()
    p.providers["aws"] = hosts("aws")
    feed(p, "aws", InstanceSeen(machine_id="i-1", name="a", state="running"),
         InstanceSeen(machine_id="i-2", name="b", state="running"),
         InstanceChanged(kind="instance_busy", machine_id="i-1", state="busy"), now=T0)
    why = "consolidating to spot/small: saves 0.8/h (1/h to 0.2/h)"
    feed(p, "aws", Order(action="return", supply="hosts", item_id="consolidate/aws/i-1", machines=["i-1"], count=1,
                         when_idle=True, reason=why), now=T0 + 1, ids=["o-1"])
    rows = {r["machine_id"]: r for r in views.instances(p, T0 + 2)}
    assert (rows["i-1"]["drain"], rows["i-1"]["drain_reason"]) == (True, why)
    assert (rows["i-2"]["drain"], rows["i-2"]["drain_reason"]) == (False, "")
    assert InstanceRow.model_validate(rows["i-1"]).drain
    feed(p, "aws", InstanceChanged(kind="instance_idle", machine_id="i-1", state="idle"), now=T0 + 3)
    feed(p, "aws", RequestPlanned(action="return", supply="hosts", order_id="o-1", machines=["i-1"], count=1),
         InstanceChanged(kind="instance_return_planned", machine_id="i-1", state="return_planned"), now=T0 + 4)
    assert not {r["machine_id"]: r for r in views.instances(p, T0 + 5)}["i-1"]["drain"], "taken up: going back"
