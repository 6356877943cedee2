"""The liar soak's ledger on made-up worlds: each figure counts what it says, and nothing else."""

from __future__ import annotations

from messages.facts import GrantChanged, Order, RequestPlanned
from state.projection import Projection
from tests.support.ledger import Graces, draw, machine_spells
from tests.support.policy import feed

G = Graces(lost_after=10, return_grace=5, request_timeout=30, act_within=4)
T = 1_000.0


def _machine(launched: float, ended: float | None = None, state: str = "running") -> dict:
    return {"machineId": "i-1", "launch_time": launched, "ended_at": ended, "state": state}


def _leaked(timeline, machine, hidden=None, end=T + 500) -> list[tuple[str, float]]:
    return [(s.kind, round(s.leaked, 3)) for s in machine_spells("c", machine, timeline, hidden, G, end)]


def test_a_machine_the_facts_hold_all_its_life_has_no_spell():
    timeline = [(T + 1, "provisioning"), (T + 2, "running"), (T + 3, "joined"), (T + 50, "return_planned"),
                (T + 51, "returning"), (T + 60, "returned")]
    assert _leaked(timeline, _machine(T + 1, T + 59, "terminated")) == []


def test_a_machine_unknown_to_the_facts_is_allowed_request_timeout_and_act_within():
    assert _leaked([(T + 2, "running")], _machine(T)) == [("unknown", 0.0)], "known 2 s after its launch"
    assert _leaked([(T + 40, "orphaned")], _machine(T)) == [("unknown", 6.0)], "30 + 4 allowed, 40 taken"
    assert _leaked([], _machine(T, T + 100, "terminated")) == [("unknown", 66.0)], "never known, ended at 100"


def test_a_lost_machine_is_allowed_the_time_it_was_hidden_then_act_within():
    timeline = [(T, "running"), (T + 1, "joined"), (T + 20, "lost"), (T + 33, "joined")]
    hidden = {"start": T + 5, "end": T + 30, "first": T + 6}
    assert _leaked(timeline, _machine(T), hidden) == [("lost", 0.0)], "adopted 3 s after the hiding ended"
    late = timeline[:-1] + [(T + 40, "orphaned")]
    assert _leaked(late, _machine(T), hidden) == [("lost", 6.0)]
    assert _leaked(late, _machine(T)) == [("lost", 16.0)], "lost with no hiding: only act_within"


def test_a_returned_machine_that_runs_on_is_allowed_return_grace_and_act_within():
    timeline = [(T, "running"), (T + 1, "joined"), (T + 5, "return_planned"), (T + 6, "returning"),
                (T + 10, "returned"), (T + 18, "orphaned"), (T + 19, "return_planned"), (T + 20, "returning"),
                (T + 25, "returned")]
    assert _leaked(timeline, _machine(T, T + 24, "terminated")) == [("returned", 0.0)]
    assert _leaked(timeline[:5], _machine(T, T + 30, "terminated")) == [("returned", 11.0)], \
        "never found again: it ran on until the provider ended it"
    assert _leaked(timeline[:5], _machine(T), end=T + 30) == [("returned", 11.0)], "alive when the ledger is drawn"


def test_spells_of_one_machine_are_each_allowed_their_own_grace():
    timeline = [(T + 1, "running"), (T + 2, "joined"), (T + 10, "returned"), (T + 12, "orphaned"),
                (T + 13, "returning"), (T + 14, "returned")]
    spells = machine_spells("c", _machine(T, T + 40, "terminated"), timeline, None, G, T + 500)
    assert [(s.kind, s.start, s.end) for s in spells] == [("unknown", T, T + 1), ("returned", T + 10, T + 12),
                                                         ("returned", T + 14, T + 40)]
    assert [round(s.leaked, 3) for s in spells] == [0.0, 0.0, 17.0]


def _sim(requests: dict, machines: dict | None = None, grants: dict | None = None) -> dict:
    return {"requests": requests, "machines": machines or {}, "grants": grants or {}}


def _made(rid: str, token: str, machines: list[str]) -> dict:
    return {"id": rid, "kind": "request", "supply": "hosts", "token": token, "machines": machines}


def _box(*mids: str) -> dict:
    return {m: {"machineId": m, "launch_time": T, "ended_at": T, "state": "terminated", "message": ""} for m in mids}


def test_double_creations_count_creations_beyond_one_per_token_and_order_and_beyond_the_count():
    p = Projection()
    feed(p, "c", Order(action="request", supply="hosts", template="t", count=1), ids=["o1"], now=T)
    feed(p, "c", RequestPlanned(action="request", supply="hosts", order_id="o1", template="t", count=1),
         ids=["o1.1"], now=T)
    once = _sim({"r1": _made("r1", "o1.1", ["m1"])}, _box("m1"))
    assert draw(p, {"c": once}, {}, G, T + 10).double_creations == 0
    twice = _sim({"r1": _made("r1", "o1.1", ["m1"]), "r2": _made("r2", "o1.1", ["m2"])}, _box("m1", "m2"))
    assert draw(p, {"c": twice}, {}, G, T + 10).double_creations == 1, "one token, two creations"
    feed(p, "c", RequestPlanned(action="request", supply="hosts", order_id="o1", template="t", count=1),
         ids=["o1.2"], now=T)
    two_tokens = _sim({"r1": _made("r1", "o1.1", ["m1"]), "r2": _made("r2", "o1.2", ["m2"])}, _box("m1", "m2"))
    assert draw(p, {"c": two_tokens}, {}, G, T + 10).double_creations == 1, "one order, two tokens that made"
    stranger = _sim({"r1": _made("r1", "nobody", ["m1"])}, _box("m1"))
    assert draw(p, {"c": stranger}, {}, G, T + 10).double_creations == 1, "made under no intent of ours"
    more = _sim({"r1": _made("r1", "o1.1", ["m1", "m2", "m3"])}, _box("m1", "m2", "m3"))
    assert draw(p, {"c": more}, {}, G, T + 10).double_creations == 2, "3 made for an intent of 1"
    short = _sim({"r1": _made("r1", "o1.1", ["m1"]), "r2": _made("r2", "o1.2", ["m2"])}, _box("m1", "m2"))
    short["machines"]["m1"]["message"] = "insufficient capacity for this template"
    assert draw(p, {"c": short}, {}, G, T + 10).double_creations == 0, "a machine that never was is no creation"


def test_units_returned_in_use_are_those_set_aside_beyond_the_units_that_stay():
    p = Projection()
    feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=6), ids=["g"], now=T)
    feed(p, "u", GrantChanged(kind="grant_granted", grant_id="g", resource="vcs", state="granted", count=6), now=T)

    def returns(*rets: tuple[int, int, int]) -> dict:
        return _sim({f"ret-{i}": {"id": f"ret-{i}", "kind": "return", "supply": "units", "token": f"t{i}",
                                  "takes": [["g", taken]], "in_use": in_use, "staying": staying}
                     for i, (taken, in_use, staying) in enumerate(rets)})

    assert draw(p, {"u": returns((2, 4, 4))}, {}, G, T).units_returned_in_use == 0
    assert draw(p, {"u": returns((4, 5, 2))}, {}, G, T).units_returned_in_use == 3
    assert draw(p, {"u": returns((1, 5, 2), (2, 0, 0))}, {}, G, T).units_returned_in_use == 1, \
        "no more than a return takes"


def test_what_anyone_still_holds_when_the_ledger_is_drawn_is_listed():
    p = Projection()
    feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=2), ids=["g"], now=T)
    feed(p, "u", GrantChanged(kind="grant_granted", grant_id="g", resource="vcs", state="granted", count=2), now=T)
    sim = _sim({}, grants={"g": {"state": "granted", "count": 2}})
    held = draw(p, {"u": sim}, {}, G, T).held_at_end
    assert held == ["u: grant g still lends 2 units", "facts: grant g still granted"]
