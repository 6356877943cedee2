"""Traces: the format's rules, errors that name file and line, and the seeded generator."""

from __future__ import annotations

import orjson
import pytest

from messages.demand import BundleItem, HostItem, UnitItem
from sim.synth import Load, Shape, generate, parse_load
from sim.trace import DEFAULT_START, TraceError, parse_trace, read_trace, write_trace


def _errors(*lines: str) -> list[str]:
    with pytest.raises(TraceError) as exc:
        parse_trace(lines, "t.jsonl")
    return [str(i) for i in exc.value.issues]


def test_items_are_declared_once_then_given_by_id_and_count():
    tr = parse_trace([
        '{"trace": {"start": "2024-05-06T00:00:00Z", "note": "two items"}}',
        '# a comment, then a blank line',
        '',
        '{"time": 0, "items": [{"id": "b", "kind": "hosts", "count": 3, "select": {"ncpus": ">=8"}},'
        ' {"id": "l", "kind": "units", "resource": "vcs", "count": 2}]}',
        '{"time": "10m", "items": [{"id": "b", "count": 5}]}',
        '{"time": 3600}',
    ], "t.jsonl")
    assert tr.start == 1714953600.0 and tr.note == "two items"
    assert [s.at for s in tr.steps] == [0, 600, 3600] and tr.span == 3600
    first, later = tr.steps[0].items, tr.steps[1].items
    assert isinstance(first[0], HostItem) and first[0].select == {"ncpus": ">=8"}
    assert isinstance(first[1], UnitItem) and first[1].resource == "vcs"
    assert later[0] == first[0].model_copy(update={"count": 5})
    assert tr.steps[1].line == 5


def test_bad_lines_are_reported_together_each_with_its_line():
    found = _errors(
        '{"time": 0, "items": [{"id": "b", "kind": "hosts", "count": 3}]}',
        'not json',
        '{"time": 60, "itmes": []}',
        '{"time": 60}',
        '{"time": 30}',
        '{"time": 90, "items": [{"id": "x", "count": 1}]}',
        '{"time": 120, "items": [{"id": "b", "kind": "units", "resource": "vcs", "count": 1}]}',
        '{"time": 150, "items": [{"id": "c", "kind": "hosts", "count": 1, "template": "t", "select": {"a": "1"}}]}',
        '{"time": 180, "hosts": [{"event": "lost"}]}',
        '{"time": "soon"}',
    )
    assert found[0].startswith("t.jsonl:2: not JSON")
    assert found[1] == "t.jsonl:3: itmes: unknown field (did you mean 'items'?)"
    assert found[2] == "t.jsonl:5: time: goes back in time (30s after 60s)"
    assert "t.jsonl:6: items[0]: item 'x' is not declared yet" in found[3]
    assert found[4] == "t.jsonl:7: items[0]: item 'b' was declared as hosts; an id keeps its kind"
    assert found[5].startswith("t.jsonl:8: items[0]: item 'c'") and "either template or select" in found[5]
    assert found[6].startswith("t.jsonl:9: hosts[0]") and "name the host" in found[6]
    assert found[7].startswith("t.jsonl:10: time: not a duration")


def test_an_empty_trace_and_a_bad_header_are_errors():
    assert _errors("# nothing") == ["t.jsonl:1: no steps: a trace needs at least one line with a time"]
    assert _errors('{"trace": {"start": "yesterday"}}', '{"time": 0}')[0].startswith(
        "t.jsonl:1: trace.start: not a time: 'yesterday'")


def test_the_generator_is_seeded_follows_the_day_and_round_trips(tmp_path):
    loads = [parse_load("hosts", "b:40:4:ncpus>=8;type=X86_64"), parse_load("units", "l:vcs:20:5")]
    assert loads[0] == Load(id="b", kind="hosts", peak=40, base=4, select={"ncpus": ">=8", "type": "=X86_64"})
    shape = Shape(days=7, step=600, bursts_per_day=1, failovers=(("a", 2),), lost=(("a", 3.0),))
    first = list(generate(loads, shape, DEFAULT_START, seed=3))
    assert first == list(generate(loads, shape, DEFAULT_START, seed=3))
    assert first != list(generate(loads, shape, DEFAULT_START, seed=4))
    path = tmp_path / "t.jsonl"
    write_trace(path, first, DEFAULT_START, note="test")
    tr = read_trace(path)
    assert tr.span == 7 * 86400
    assert sum(len(s.failover) for s in tr.steps) == 2
    assert any(h.provider == "a" for s in tr.steps for h in s.hosts)
    want: dict[float, int] = {}
    count = 0
    for step in tr.steps:
        for item in step.items:
            if item.id == "b":
                count = item.count
        want[step.at] = count
    # 2024-01-01 is a Monday: afternoons want more than nights, weekdays more than the weekend.

    def at(day: int, hour: int) -> int:
        return want[max(t for t in want if t <= day * 86400 + hour * 3600)]

    assert at(0, 15) > at(0, 3) + 10
    assert at(2, 15) > at(5, 15)


def test_the_generator_writes_bundle_items_that_read_back():
    load = parse_load("bundles", "sim:ncpus=2;mem=0.5:400:40:type=X86_64")
    assert load == Load(id="sim", kind="bundles", peak=400, base=40, select={"type": "=X86_64"},
                        resources={"ncpus": 2, "mem": 0.5})
    steps = list(generate([load], Shape(days=1, step=600), DEFAULT_START, seed=1))
    tr = parse_trace([orjson.dumps(s).decode() for s in steps], "t.jsonl")
    first = tr.steps[0].items[0]
    assert isinstance(first, BundleItem) and first.resources == {"ncpus": 2, "mem": 0.5}
    assert max(i.count for s in tr.steps for i in s.items) > 200


@pytest.mark.parametrize("kind,spec", [("hosts", "b"), ("hosts", "b:x"), ("units", "l:vcs"), ("hosts", "b:4:1:>=3"),
                                       ("bundles", "s:400"), ("bundles", "s:ncpus:400"), ("bundles", "s:ncpus=0:4"),
                                       ("bundles", "s:ncpus=inf:4")])
def test_bad_item_specs_say_the_expected_form(kind, spec):
    with pytest.raises(ValueError, match="expected"):
        parse_load(kind, spec)
