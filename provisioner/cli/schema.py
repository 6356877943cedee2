"""``provisioner schema demand|host-event|fact``: the JSON Schema of what a scheduler sends and reads.

Generated from the very models the daemon validates with, so a scheduler in
any language can produce and check documents that the daemon accepts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from messages.demand import DemandSnapshot, HostEvent, SupplySnapshot
from messages.facts import Fact

#: What each name gives the schema of.
SCHEMAS: dict[str, type[BaseModel]] = {"demand": DemandSnapshot, "host-event": HostEvent, "supply": SupplySnapshot,
                                       "fact": Fact}


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the documents ``name`` names, as the daemon validates them."""
    doc = SCHEMAS[name].model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **doc}
