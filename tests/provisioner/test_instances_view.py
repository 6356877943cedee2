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
