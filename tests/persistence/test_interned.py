"""What repeats across a projection's records (provider names, templates, resources, states, reasons) is one
string each, equal to what the facts said, however the facts were decoded; a replay still builds what the
live facts built."""

from __future__ import annotations

import logging

import pytest

from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, RequestChanged, RequestPlanned, make_fact
from persistence.controller import open_controller
from persistence.replay import replay
from state.projection import Projection
from tests.support.facts import state
from tests.support.snapshots import varied_log


def fresh(s: str) -> str:
    """An equal string that is a new object, as a decoder that caches no string gives one per fact."""
    out = (s + ".")[:-1]
    assert out == s and out is not s
    return out


def _log(n: int) -> list:
    facts = [make_fact(RequestPlanned(action="request", supply="hosts", template=fresh("big-template"), count=n),
                       provider=fresh("aws-east"), fact_id="r1"),
             make_fact(RequestChanged(kind="request_submitted", request_id="r1", state=fresh("submitted"),
                                      provider_request_id="pr"), provider=fresh("aws-east")),
             make_fact(RequestPlanned(action="request", supply="units", resource=fresh("licenses"), count=2),
                       provider=fresh("aws-east"), fact_id="g1"),
             make_fact(GrantChanged(kind="grant_orphan_found", grant_id="g2", resource=fresh("licenses"),
                                    state="orphaned", count=1), provider=fresh("aws-east"))]
    for m in range(n):
        facts.append(make_fact(InstanceSeen(machine_id=f"m{m}", name=f"h{m}", request_id="r1",
                                            template=fresh("big-template"), state=fresh("running"),
                                            reason=fresh("listed by the provider's scan")),
                               provider=fresh("aws-east")))
        facts.append(make_fact(InstanceChanged(kind="instance_lost", machine_id=f"m{m}", state=fresh("lost"),
                                               reason=fresh("the provider no longer lists it")),
                               provider=fresh("aws-east")))
    return [f.model_copy(update={"seq": i + 1}) for i, f in enumerate(facts)]


def test_what_repeats_across_records_is_one_string_equal_to_what_the_facts_said():
    p = Projection()
    p.apply_all(_log(3))
    instances = list(p.instances.values())
    assert [(i.provider, i.template, i.state, i.reason) for i in instances] == \
        [("aws-east", "big-template", "lost", "the provider no longer lists it")] * 3
    assert [i.history[0] for i in instances] == ["running"] * 3
    assert [i.history[2] for i in instances] == ["listed by the provider's scan"] * 3
    for values in ([i.provider for i in instances], [i.template for i in instances],
                   [i.history[0] for i in instances], [i.history[2] for i in instances],
                   [i.history[3] for i in instances], [i.history[5] for i in instances]):
        assert len({id(v) for v in values}) == 1, values
    request, units = p.requests["r1"], p.requests["g1"]
    grants = list(p.grants.values())
    assert request.state == "submitted" and units.resource == "licenses"
    everywhere = [request.provider, units.provider, *(g.provider for g in grants), *(i.provider for i in instances),
                  *p.parts]
    assert set(everywhere) == {"aws-east"} and len({id(v) for v in everywhere}) == 1, \
        "one provider name in every record and index"
    assert [g.resource for g in grants] == ["licenses", "licenses"] and grants[0].resource is grants[1].resource
    assert request.template is instances[0].template


@pytest.mark.parametrize("seed", [1, 2])
def test_a_replay_from_the_controller_builds_what_the_live_facts_built(tmp_path, seed, caplog):
    caplog.set_level(logging.ERROR, logger="state.projection")  # the log's illegal facts are expected
    c = open_controller(f"sqlite:///{tmp_path / 'log.db'}")
    try:
        live = Projection()
        for start in range(0, len(facts := varied_log(seed)), 50):
            live.apply_all(c.append(facts[start:start + 50]).accepted)
        replayed = replay(c)
    finally:
        c.close()
    assert live.instances and replayed.seq == live.seq
    assert state(replayed) == state(live)
