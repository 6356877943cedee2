"""Snapshots: a restored projection plus the facts after it is the projection a full replay builds."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from messages.facts import Fact
from persistence.snapshot import Snapshot, decode, encode
from policy.costs import costs
from provisioner.read import views
from state.projection import Projection
from tests.support.facts import state
from tests.support.snapshots import UNITS, varied_log

NOW = 9_000.0


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.ERROR, logger="state.projection")  # the log's illegal facts are expected


def replay(facts: list[Fact], only: Any = None) -> Projection:
    p = Projection(only)
    p.apply_all(facts)
    return p


def snapshot_at(facts: list[Fact], cut: int) -> Snapshot:
    p = replay(facts[:cut])
    return decode(encode(p, facts[cut - 1].id if cut else "", {"order": cut}))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_restored_snapshot_plus_tail_equals_full_replay(seed):
    facts = varied_log(seed)
    full = replay(facts)
    assert full.anomalies and full.decisions and full.budget_events and full.host_event_seq
    assert any(i.state == "orphaned" for i in full.instances.values())
    assert any(g.state == "orphaned" for g in full.grants.values())
    for cut in (0, 1, len(facts) // 3, len(facts) // 2, len(facts) - 1, len(facts)):
        p = snapshot_at(facts, cut).projection()
        assert p.seq == (facts[cut - 1].seq if cut else 0)
        p.apply_all(facts[cut:])
        assert state(p) == state(full), f"restored at fact {cut} of {len(facts)}"


def test_views_costs_and_budget_usage_answer_the_same_after_a_restore():
    facts = varied_log(4)
    full = replay(facts)
    restored = snapshot_at(facts, len(facts) * 2 // 3).projection()
    restored.apply_all(facts[len(facts) * 2 // 3:])
    assert views.instances(restored, NOW) == views.instances(full, NOW)
    assert views.requests(restored) == views.requests(full)
    assert views.resources(restored) == views.resources(full)
    assert views.decisions(restored) == views.decisions(full)
    assert views.orphans(restored, NOW) == views.orphans(full, NOW)
    assert views.providers(restored, [], NOW) == views.providers(full, [], NOW)
    assert views.costs(restored, NOW) == views.costs(full, NOW)
    assert costs(restored.providers, restored.instances, restored.grants, NOW, since=2_000.0) == \
        costs(full.providers, full.instances, full.grants, NOW, since=2_000.0)
    assert views.costs(full, NOW) and views.orphans(full, NOW), "the log has costs and orphans to compare"


def test_every_restore_is_a_projection_of_its_own():
    facts = varied_log(5)
    snap = snapshot_at(facts, len(facts))
    one, two = snap.projection(), snap.projection()
    order = next(o for o in one.orders.values())
    order.request_ids.append("mine")
    grant = next(iter(one.grants.values()))
    grant.given_back.append((1.0, 1))
    for part in one.parts.values():
        part.open_requests.clear()
    assert "mine" not in two.orders[order.id].request_ids
    assert (1.0, 1) not in two.grants[grant.id].given_back
    assert two.open(None).requests, "one projection's changes never reach another restored from the same snapshot"
    assert state(snap.projection()) == state(replay(facts))


@pytest.mark.parametrize("providers", [["a"], [UNITS], ["a", "b"], ["nobody"]])
def test_a_part_restores_what_a_replay_of_those_providers_facts_builds(providers):
    """As the journal feeds a provider's owner: its facts and global ones."""
    facts = varied_log(6)

    def wanted(f: Fact) -> bool:
        return not f.provider or f.provider in providers

    cut = len(facts) // 2
    filtered = replay([f for f in facts if wanted(f)])
    p = snapshot_at(facts, cut).part(providers).projection()
    p.apply_all([f for f in facts[cut:] if wanted(f)])
    # seq: a part starts at the snapshot's, past facts of others it was never sent (harmless: they never come).
    # anomalies: kept by the full projection only.
    skip = ("seq", "anomalies")
    assert state(p, skip=skip) == state(filtered, skip=skip)
    assert p.seq == max(facts[cut - 1].seq, *(f.seq for f in facts[cut:] if wanted(f)))


def test_parts_of_many_providers_pick_their_own_records_only():
    facts = varied_log(7)
    snap = snapshot_at(facts, len(facts))
    a = snap.part(["a"]).projection()
    assert a.instances and {i.provider for i in a.instances.values()} == {"a"}
    assert {r.provider for r in a.requests.values()} == {"a"}
    assert not a.grants and set(a.providers) == {"a"}
    assert a.decisions, "global facts stay in every part"
    assert snap.part(None) is snap


def test_a_projection_holding_state_a_snapshot_does_not_know_is_refused():
    p = replay(varied_log(8)[:50])
    p.something_new = {}  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="something_new"):
        encode(p, "f50", {})


def test_a_body_that_does_not_fit_is_a_value_error():
    facts = varied_log(9)
    p = replay(facts)
    good = encode(p, facts[-1].id, {})
    with pytest.raises(ValueError):
        decode(good[: len(good) // 2])
    with pytest.raises(ValueError):
        decode(good.replace(b'"instances"', b'"instancez"', 1))
    with pytest.raises(ValueError, match="names records"):
        p.parts["a"].live_instances["a/ghost"] = None
        decode(encode(p, facts[-1].id, {}))


def test_record_fields_each_have_a_codec():
    """A field added to a record without a codec fails at import, never silently at restore."""
    from persistence import snapshot

    @dataclasses.dataclass
    class Odd:
        provider: str
        when: set[int]

    with pytest.raises(TypeError, match="Odd.when"):
        snapshot._Kind(Odd, "odd")


@pytest.mark.parametrize("change", [lambda n: [-1, *n[1:]], lambda n: [n[0] + 1, *n[1:]], lambda n: n[:-1]])
def test_history_lengths_that_do_not_add_up_are_a_value_error(change):
    import orjson

    facts = varied_log(10)
    body = orjson.loads(encode(replay(facts), facts[-1].id, {}))
    column = body["records"]["instances"]["fields"]["history"]
    column["length"] = change(column["length"])
    with pytest.raises(ValueError, match="history lengths"):
        decode(orjson.dumps(body))


def test_a_restore_keeps_one_string_per_instance_key_as_a_replay_does():
    facts = varied_log(11)
    for p in (replay(facts), snapshot_at(facts, len(facts)).projection()):
        records = {id(inst.key) for inst in p.instances.values()}
        assert {id(k) for k in p.instances} == records
        in_indexes = {id(k) for part in p.parts.values()
                      for k in part.live_instances}
        assert in_indexes and in_indexes <= records, "every index holds the record's own key string"


def test_an_instance_stored_under_another_key_is_a_value_error():
    import orjson

    facts = varied_log(12)
    body = orjson.loads(encode(replay(facts), facts[-1].id, {}))
    keys = body["records"]["instances"]["keys"]
    keys[0], keys[1] = keys[1], keys[0]
    with pytest.raises(ValueError, match="key differs"):
        decode(orjson.dumps(body))
