"""The scheduler's interface page: its examples are what the daemon accepts, and the schemas agree with the models."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from messages.demand import DemandSnapshot, HostEvent, SupplySnapshot
from provisioner.api.models import HostEventBody, InstanceRow
from provisioner.cli.schema import schema

PAGE = Path(__file__).resolve().parents[2] / "docs" / "scheduler-interface.md"


def examples() -> list[dict]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", PAGE.read_text(), re.S)]


def test_every_example_on_the_page_is_accepted_by_the_schema_and_by_the_daemon():
    docs = examples()
    kinds = {"demand": 0, "body": 0, "stored": 0, "supply": 0, "instance": 0}
    for doc in docs:
        if "drain" in doc:  # a row of the instances view, as the scheduler reads it
            assert set(doc) == set(InstanceRow.model_fields), "the row as the view gives it, every field"
            InstanceRow.model_validate(doc)
            kinds["instance"] += 1
        elif "hosts" in doc:
            SupplySnapshot.model_validate(doc)
            kinds["supply"] += 1
        elif "items" in doc:
            jsonschema.validate(doc, schema("demand"))
            DemandSnapshot.model_validate(doc)
            kinds["demand"] += 1
        elif set(doc) <= {"event", "provider"}:
            HostEventBody.model_validate(doc)
            kinds["body"] += 1
        else:
            jsonschema.validate(doc, schema("host-event"))
            HostEvent.model_validate(doc)
            kinds["stored"] += 1
    assert kinds == {"demand": 1, "body": 1, "stored": 1, "supply": 1, "instance": 1}, \
        "the page shows each document once"


@pytest.mark.parametrize("doc", [
    {"items": [{"id": "a", "kind": "hosts", "count": -1}]},
    {"items": [{"id": "a", "kind": "hosts", "count": 1, "colour": "red"}]},
    {"items": [{"id": "a", "kind": "gpus", "count": 1}]},
    {"items": [{"id": "a", "kind": "units", "count": 1}]},
    {"items": [{"id": "a", "kind": "bundles", "count": 1, "resources": {}}]},
    {"items": [{"id": "a", "kind": "hosts", "count": True}]},
    {"items": "all of them"},
])
def test_what_the_schema_refuses_the_daemon_refuses_too(doc):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema("demand"))
    with pytest.raises(ValidationError):
        DemandSnapshot.model_validate(doc)


@pytest.mark.slow  # real processes
def test_the_command_prints_the_schema_the_daemon_validates_with():
    for what in ("demand", "host-event", "supply", "fact"):
        out = subprocess.run([sys.executable, "-m", "provisioner.cli", "schema", what], capture_output=True,
                             text=True, timeout=60, check=True)
        printed = json.loads(out.stdout)
        assert printed == schema(what)
        jsonschema.Draft202012Validator.check_schema(printed)
