"""Every edge of every state machine is allowed, and every pair not listed is refused."""

import itertools

import pytest

from messages.states import GRANT, INSTANCE, REQUEST, History, IllegalTransition, OnRestart

MACHINES = [REQUEST, INSTANCE, GRANT]
EDGES = [(m, src, dst) for m in MACHINES for src, dsts in m.edges.items() for dst in dsts]
NON_EDGES = [
    (m, src, dst)
    for m in MACHINES
    for src, dst in itertools.product(sorted(m.states), sorted(m.states))
    if dst not in m.edges.get(src, {})
]


@pytest.mark.parametrize("machine,src,dst", EDGES, ids=lambda v: getattr(v, "name", v))
def test_every_listed_edge_is_allowed(machine, src, dst):
    # Walk to ``src`` through the table from a state records start in, then take the edge.
    path = _path_from_initial(machine, src)
    history = History().advance(machine, path[0], 0.0)
    for i, state in enumerate(path[1:], 1):
        history = history.advance(machine, state, float(i))
    assert history.state == src
    after = history.advance(machine, dst, 100.0, "test")
    assert after.state == dst
    assert after.since(dst) == 100.0
    assert machine.edges[src][dst], "every edge carries a comment saying when it happens"


@pytest.mark.parametrize("machine,src,dst", NON_EDGES, ids=lambda v: getattr(v, "name", v))
def test_every_unlisted_pair_is_refused(machine, src, dst):
    with pytest.raises(IllegalTransition, match=machine.name):
        machine.check(src, dst)
    # A history in ``src`` refuses it as well, with the same words (it looks the edge up in ``moves``).
    history = History((src, 0.0, ""))
    with pytest.raises(IllegalTransition, match=f"{src!r} -> {dst!r} is not allowed"):
        history.advance(machine, dst, 1.0)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_tables_are_closed(machine):
    # Every state named in an edge has a restart rule. A terminal state is left only when the provider
    # shows later that it was no end: the record is ours again, adopted (joined) or to give back (orphaned).
    named = set(machine.edges) | {d for dsts in machine.edges.values() for d in dsts} | set(machine.initial)
    assert named == set(machine.states)
    for state in machine.terminal:
        assert set(machine.edges.get(state, {})) <= {"orphaned", "joined"}
        assert machine.on_restart[state] is OnRestart.KEEP
    for state in machine.states - machine.terminal:
        assert _reachable_terminal(machine, state), f"{machine.name}.{state} can never finish"


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_cannot_start_outside_initial(machine):
    for state in machine.states - machine.initial:
        with pytest.raises(IllegalTransition, match="cannot start in"):
            History().advance(machine, state, 0.0)
        with pytest.raises(IllegalTransition, match="cannot start in"):
            History.begin(machine, state, 0.0)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_a_history_begun_is_the_first_advance_of_an_empty_one(machine):
    for state in machine.initial:
        begun = History.begin(machine, state, 5.0, "why")
        assert begun == History().advance(machine, state, 5.0, "why")
        assert type(begun) is History and begun.state == state


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_moves_are_the_initial_states_and_the_edges(machine):
    assert machine.moves[None] == machine.initial
    assert {src: set(dsts) for src, dsts in machine.moves.items() if src is not None} == {
        src: set(dsts) for src, dsts in machine.edges.items()}


def test_history_keeps_order_and_times():
    h = History().advance(REQUEST, "planned", 1.0).advance(REQUEST, "submitted", 2.0)
    h = h.advance(REQUEST, "running", 3.0)
    assert [c.state for c in h.changes] == ["planned", "submitted", "running"]
    assert h.since("submitted") == 2.0
    assert h.since("complete") is None
    assert h.state == "running" and History().state is None


def test_a_history_rebuilt_from_its_changes_is_the_same_and_advancing_leaves_the_old_one_alone():
    old = History().advance(INSTANCE, "requested", 1.0).advance(INSTANCE, "provisioning", 2.0, "why")
    new = old.advance(INSTANCE, "running", 3.0)
    assert History.of(old.changes) == old and History.of(()) == History()
    assert [(c.state, c.at, c.reason) for c in old.changes] == [("requested", 1.0, ""), ("provisioning", 2.0, "why")]
    assert (old.state, new.state) == ("provisioning", "running")
    assert new.since("running") == 3.0 and old.since("running") is None
    assert new.changes[:2] == old.changes


def test_in_flight_states_resume_and_intents_repeat():
    assert REQUEST.on_restart["planned"] is OnRestart.REPEAT_OR_FAIL
    assert REQUEST.on_restart["submitted"] is OnRestart.POLL
    assert INSTANCE.on_restart["return_planned"] is OnRestart.REPEAT
    assert INSTANCE.on_restart["returning"] is OnRestart.POLL
    assert GRANT.on_restart["return_planned"] is OnRestart.REPEAT


def _walk(machine, start, goal):
    """Shortest path of states from ``start`` to ``goal`` through the table, or None."""
    frontier, seen = [[start]], {start}
    while frontier:
        path = frontier.pop(0)
        if path[-1] == goal:
            return path
        for nxt in machine.edges.get(path[-1], {}):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(path + [nxt])
    return None


def _path_from_initial(machine, goal):
    for start in sorted(machine.initial):
        path = _walk(machine, start, goal)
        if path:
            return path
    raise AssertionError(f"{machine.name}.{goal} is unreachable")


def _reachable_terminal(machine, state):
    return any(_walk(machine, state, t) for t in machine.terminal)
