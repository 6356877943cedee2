"""Each state is named once: the tables agree with their names, facts refuse a state their machine lacks,
and an instance's change of state has the one kind that state has."""

from typing import Literal, get_args

import pytest
from pydantic import ValidationError

from messages.facts import INSTANCE_CHANGE, GrantChanged, InstanceChanged, InstanceSeen, RequestChanged
from messages.states import INSTANCE, NAMED, InstanceState, OnRestart, StateMachine, check_named


@pytest.mark.parametrize("machine,names", NAMED, ids=lambda v: getattr(v, "name", ""))
def test_each_table_has_the_states_its_names_give(machine, names):
    assert machine.states == frozenset(get_args(names))
    check_named(machine, names)


def test_a_table_with_a_state_its_names_lack_is_refused():
    machine = StateMachine(name="thing", initial=frozenset({"new"}), edges={"new": {"gone": "it went"}},
                           on_restart={"new": OnRestart.KEEP, "gone": OnRestart.KEEP})
    check_named(machine, Literal["new", "gone"])
    with pytest.raises(ValueError, match=r"thing states \['gone'\]"):
        check_named(machine, Literal["new"])
    # An edge to a state that has no restart rule is caught too.
    leaky = StateMachine(name="leaky", initial=frozenset({"new"}), edges={"new": {"elsewhere": "?"}},
                         on_restart={"new": OnRestart.KEEP})
    with pytest.raises(ValueError, match="elsewhere"):
        check_named(leaky, Literal["new"])


@pytest.mark.parametrize("state", sorted(INSTANCE_CHANGE))
def test_an_instance_change_has_its_states_kind(state):
    fact = InstanceChanged.to(state, "m-1", reason="why")
    assert (fact.kind, fact.state, fact.machine_id, fact.reason) == (INSTANCE_CHANGE[state], state, "m-1", "why")
    # What a replay reads back is the same fact.
    assert InstanceChanged.model_validate_json(fact.model_dump_json()) == fact


def test_every_instance_state_but_the_first_has_a_change_kind():
    assert set(INSTANCE_CHANGE) == set(get_args(InstanceState)) - {"requested"}
    assert set(INSTANCE_CHANGE.values()) == set(get_args(InstanceChanged.model_fields["kind"].annotation))
    assert "requested" in INSTANCE.initial  # instance_seen records it; no change leads into it


@pytest.mark.parametrize("make", [
    lambda: RequestChanged(kind="request_failed", request_id="r", state="idle"),
    lambda: InstanceChanged(kind="instance_idle", machine_id="m", state="idel"),
    lambda: InstanceSeen(machine_id="m", name="m", state="granted"),
    lambda: GrantChanged(kind="grant_granted", grant_id="g", resource="vcs", state="busy"),
], ids=["request", "instance", "instance-seen", "grant"])
def test_a_fact_naming_a_state_its_machine_lacks_is_refused(make):
    with pytest.raises(ValidationError, match="state"):
        make()
