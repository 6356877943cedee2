"""Models our own code fills in (``made``), not validated, are the models validation would make."""

import pytest
from pydantic import ValidationError

from messages.base import copied, made
from messages.demand import HostItem
from messages.facts import Fact, InstanceChanged, make_fact
from messages.scripts import Machine, RequestStatus, ScriptResult, StatusReport


def test_a_made_document_equals_the_validated_one_and_dumps_the_same():
    machine = dict(machine_id="m-1", name="h1", result="succeed", status="", private_ip=None, public_ip=None,
                   launched_at=12.5, message="", template="small")
    state = dict(request_id="r-1", status="complete", message="", granted=None)
    ours = made(StatusReport, requests=[made(RequestStatus, machines=[made(Machine, **machine)], **state)])
    theirs = StatusReport.model_validate({"requests": [{**state, "machines": [machine]}]})
    assert ours == theirs
    assert ours.model_dump() == theirs.model_dump()
    assert ours.requests[0].machines[0].__pydantic_fields_set__ == set(machine)
    with pytest.raises(Exception):  # frozen, as validated ones are
        ours.requests = []  # type: ignore[misc]


def test_a_document_missing_a_field_is_refused_not_left_without_its_default():
    with pytest.raises(TypeError, match="ScriptResult made with fields"):
        made(ScriptResult, provider="p", action="status", outcome="ok")
    with pytest.raises(TypeError, match="stray"):
        made(RequestStatus, request_id="r", status="running", message="", machines=[], granted=None, stray=1)


def test_make_fact_gives_the_fact_validation_gives():
    payload = InstanceChanged(kind="instance_idle", machine_id="m-1", state="idle")
    fact = make_fact(payload, provider="cloud", lease="provider:cloud", fence=3, fact_id="instance-00000001",
                     now=1234.5, seq=7)
    valid = Fact(seq=7, id="instance-00000001", time=1234.5, provider="cloud", lease="provider:cloud", fence=3,
                 payload=payload)
    assert fact == valid
    assert fact.model_dump_json() == valid.model_dump_json()
    assert make_fact(payload, now=10).time == 10.0 and type(make_fact(payload, now=10).time) is float
    assert make_fact(payload).id.startswith("instance-")


@pytest.mark.parametrize("bad", [
    {"fact_id": "has space"}, {"fact_id": "x" * 101}, {"fence": -1}, {"now": "soon"}, {"provider": None},
])
def test_make_fact_refuses_what_fact_refuses_and_names_the_field(bad):
    payload = InstanceChanged(kind="instance_idle", machine_id="m-1", state="idle")
    args = {"fact_id": "instance-1", "now": 1.0, **bad}
    with pytest.raises(ValidationError) as err:
        make_fact(payload, **args)
    field = {"fact_id": "id", "now": "time"}.get(next(iter(bad)), next(iter(bad)))
    assert field in str(err.value)


def test_copied_is_model_copy_with_its_update():
    item = HostItem(id="web", count=3, select={"zone": "a"})
    ours, theirs = copied(item, count=5), item.model_copy(update={"count": 5})
    assert ours == theirs and ours.count == 5 and item.count == 3
    assert ours.model_fields_set == theirs.model_fields_set
    assert ours.model_dump_json() == theirs.model_dump_json()
    assert ours.select is item.select  # unchanged values are shared, as model_copy shares them
