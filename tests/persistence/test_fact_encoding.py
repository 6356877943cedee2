"""How facts become rows: the fast paths give what pydantic's general methods give."""

from __future__ import annotations

import pytest

from messages.facts import Fact, InstanceSeen, RequestChanged, ResourceTotalChanged, UsageObserved, make_fact
from persistence.decoding import Decoder
from persistence.encoding import at_seq, stored_fact

FACTS = [
    make_fact(UsageObserved(resource="vcs", in_use=3), provider="flexlm", lease="provider:flexlm", fence=7),
    make_fact(UsageObserved(resource="vcs", in_use=0, total=12), now=1e16),
    make_fact(RequestChanged(kind="request_failed", request_id="req-1", state="failed", outcome="capacity",
                             reason='quota "exceeded"\nline two, ünïcode'), provider="aws-east", now=0.1),
    make_fact(InstanceSeen(machine_id="i-1", name="host-1", launched_at=1_700_000_000.25), seq=42),
    make_fact(ResourceTotalChanged(resource="vcs", base=5, borrowed=3, total=8), fact_id="total-1", now=-0.0),
    # Built without naming seq: its fields set lacks it.
    Fact(id="usage-2", time=1.5, payload=UsageObserved(resource="vcs", in_use=1)),
]


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f.kind)
def test_a_stored_fact_is_the_models_json_without_its_seq(fact: Fact) -> None:
    assert stored_fact(fact) == fact.model_dump_json(exclude_none=True, exclude={"seq"}).encode()
    assert b'"seq"' not in stored_fact(fact)


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f.kind)
def test_a_fact_at_its_seq_is_the_models_copy_with_that_seq(fact: Fact) -> None:
    placed = at_seq(fact, 9)
    expected = fact.model_copy(update={"seq": 9})
    assert placed == expected and placed.seq == 9
    assert placed.model_fields_set == expected.model_fields_set
    assert placed.model_dump_json() == expected.model_dump_json()
    assert fact.seq != 9  # the original is left as it was
    fields = set(fact.model_fields_set)
    placed.model_copy(update={"v": 2})  # make_fact names every field but v
    assert fact.model_fields_set == fields
    # and it reads back from its row as the same fact
    assert Decoder("test").fact(9, stored_fact(placed)) == placed


def test_a_page_decodes_as_its_rows_one_by_one_and_skips_the_same_rows_with_the_same_warnings(caplog) -> None:
    # A page of rows: the stores' own, one edited by hand into a shape no model takes, one that is no JSON,
    # one with a field the model lacks (a newer schema's).
    rows = [(i + 1, stored_fact(fact)) for i, fact in enumerate(FACTS)]
    rows.insert(2, (50, stored_fact(FACTS[0]).replace(b'"in_use":3', b'"in_use":-3')))
    rows.insert(4, (51, b'{"id": "x", "time": '))
    rows.append((52, stored_fact(FACTS[1]).replace(b'"v":1', b'"v":1,"shard":4')))
    one_by_one, paged = Decoder("one"), Decoder("page")
    caplog.set_level("WARNING")
    singly = [fact for seq, stored in rows if (fact := one_by_one.fact(seq, stored)) is not None]
    warned = [r.getMessage().replace("controller one:", "") for r in caplog.records]
    caplog.clear()
    page: list[Fact] = []
    paged.facts(rows, page)
    assert [r.getMessage().replace("controller page:", "") for r in caplog.records] == warned
    assert [w.split(" that ")[0] for w in warned] == [" skipping fact seq 50", " skipping fact seq 51",
                                                      " skipping fact seq 52"]
    assert page == singly and [f.seq for f in page] == list(range(1, len(FACTS) + 1))
    assert [f.model_fields_set for f in page] == [f.model_fields_set for f in singly]
    assert page == [at_seq(fact, i + 1) for i, fact in enumerate(FACTS)]
