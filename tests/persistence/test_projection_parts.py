"""Per-provider parts: an owner reads what is in motion at its provider without scanning the others'."""

from __future__ import annotations

from collections import Counter

import pytest

from messages.facts import InstanceChanged, InstanceSeen, Order, RequestChanged, RequestPlanned, make_fact
from persistence.snapshot import decode, encode
from state.projection import Projection
from tests.support.snapshots import varied_log

T0 = 1_000.0


def _log() -> list:
    facts = []
    for name in ("a", "b"):
        facts += [
            make_fact(Order(action="request", supply="hosts", item_id="i", template="t", count=2),
                      provider=name, fact_id=f"{name}-o1", now=T0),
            make_fact(Order(action="request", supply="hosts", item_id="i", template="t", count=1),
                      provider=name, fact_id=f"{name}-o2", now=T0),
            make_fact(RequestPlanned(action="request", supply="hosts", order_id=f"{name}-o1", template="t", count=2),
                      provider=name, fact_id=f"{name}-r1", now=T0 + 1),
            make_fact(RequestChanged(kind="request_submitted", request_id=f"{name}-r1", state="submitted",
                                     provider_request_id="pr"), provider=name, now=T0 + 2),
            make_fact(InstanceSeen(machine_id="m1", name="h1", request_id=f"{name}-r1", state="running"),
                      provider=name, now=T0 + 3),
            make_fact(InstanceSeen(machine_id="m2", name="h2", request_id=f"{name}-r1", state="running"),
                      provider=name, now=T0 + 3),
        ]
    facts += [
        make_fact(InstanceChanged(kind="instance_joined", machine_id="m1", state="joined"), provider="a", now=T0 + 4),
        make_fact(InstanceChanged(kind="instance_lost", machine_id="m2", state="lost"), provider="b", now=T0 + 4),
        make_fact(RequestChanged(kind="request_completed", request_id="b-r1", state="complete"), provider="b",
                  now=T0 + 5),
    ]
    return [f.model_copy(update={"seq": i + 1}) for i, f in enumerate(facts)]


def test_each_provider_reads_only_its_own_part():
    p = Projection()
    p.apply_all(_log())
    orders, requests, instances, grants = p.open("a")
    assert [o.id for o in orders] == ["a-o2"], "an order taken up by a request is no longer open"
    assert [r.id for r in requests] == ["a-r1"]
    assert [i.key for i in instances] == ["a/m1", "a/m2"] and grants == []
    assert [i.key for i in p.instances_in("joined", "running", provider="a")] == ["a/m1", "a/m2"]
    assert [i.key for i in p.instances_in("running", provider="b")] == ["b/m1"]
    assert p.open("b").requests == [], "b's request completed"
    assert [r.id for r in p.requests_by("b")] == ["b-r1"], "ended requests stay listed for LSF-style scans"
    assert p.live_by_name("b").keys() == {"h1"} and p.live_by_name("b")["h1"].key == "b/m1", \
        "b/m2 (h2) was lost: only live instances are found by name"


def test_without_a_provider_the_parts_add_up_to_everything_in_motion():
    p = Projection()
    p.apply_all(_log())
    orders, requests, instances, _ = p.open()
    assert sorted(o.id for o in orders) == ["a-o2", "b-o2"]
    assert [r.id for r in requests] == ["a-r1"]
    assert sorted(i.key for i in instances) == ["a/m1", "a/m2", "b/m1"]
    assert sorted(p.live_keys()) == ["a/m1", "a/m2", "b/m1"]
    assert sorted(i.key for i in p.instances_in("running")) == ["a/m2", "b/m1"]


def test_a_provider_with_nothing_in_motion_has_an_empty_part_that_stays_empty():
    p = Projection()
    p.apply_all(_log())
    assert tuple(p.open("nobody")) == ([], [], [], []) and p.instances_in("running", provider="nobody") == []
    assert p.requests_by("nobody") == []
    assert "nobody" not in p.parts, "reading a part creates none"


def test_instances_in_reads_live_instances_in_the_order_of_the_log():
    p = Projection()
    p.apply_all(_log())
    assert [i.key for i in p.instances_in("running", "joined", provider="a")] == ["a/m1", "a/m2"], \
        "the order of the log, not of the states asked for"
    assert [i.key for i in p.instances_in("running", provider="b")] == ["b/m1"]
    p.apply(make_fact(InstanceChanged(kind="instance_joined", machine_id="m1", state="joined"), provider="b",
                      now=T0 + 6).model_copy(update={"seq": 100}))
    assert p.instances_in("running", provider="b") == [], "the last instance left running"
    assert [i.key for i in p.instances_in("joined", provider="b")] == ["b/m1"]
    with pytest.raises(ValueError, match="live instances only"):
        p.instances_in("joined", "lost", provider="b")
    assert p.instances["b/m2"].state == "lost", "an ended instance keeps its record"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counts_by_state_follow_the_live_instances_through_the_log_and_a_snapshot(seed):
    """``instances_in`` skips a part by its counts by state: they must say what its live instances say,
    after every fact (instances ending, coming back when listed again) and after a restore."""
    facts = varied_log(seed)
    p = Projection()
    for i, fact in enumerate(facts):
        p.apply(fact)
        for name, part in p.parts.items():
            live = Counter(p.instances[k].state for k in part.live_instances)
            assert part.live_states == dict(live), f"{name} after fact {i}"
    restored = decode(encode(p, facts[-1].id, {})).projection()
    assert {n: part.live_states for n, part in restored.parts.items()} == \
        {n: part.live_states for n, part in p.parts.items()}
    for name in p.parts:
        for states in (("running",), ("joined", "idle"), ("requested", "provisioning"), ("busy",)):
            assert restored.instances_in(*states, provider=name) == p.instances_in(*states, provider=name) == [
                rec for k in p.parts[name].live_instances if (rec := p.instances[k]).state in states]
