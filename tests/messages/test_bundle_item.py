"""A bundle item: work to fit, validated as strictly as the other demand items."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from messages.demand import BundleItem, DemandSnapshot


def test_a_bundle_item_decodes_from_the_schedulers_json():
    snap = DemandSnapshot.model_validate({"seq": 3, "items": [
        {"id": "j1", "kind": "bundles", "count": 400, "resources": {"ncpus": 0.5, "mem": 8192},
         "select": {"type": "X86_64", "ncpus": ">=2"}, "exclusive": True, "priority": 2},
        {"id": "h1", "kind": "hosts", "count": 2},
    ]})
    item = snap.items[0]
    assert isinstance(item, BundleItem)
    assert item.resources == {"ncpus": 0.5, "mem": 8192} and item.exclusive and item.priority == 2
    assert item.select == {"type": "X86_64", "ncpus": ">=2"}
    assert snap.items[1].kind == "hosts", "host items beside it decode as before"
    assert BundleItem.model_validate(item.to_dict()) == item, "what is written decodes back the same"


@pytest.mark.parametrize("field, value, said", [
    ("count", -1, "greater than or equal to 0"),
    ("count", True, "valid integer"),
    ("resources", {}, "at least 1 item"),
    ("resources", {"ncpus": 0}, "resources.ncpus: must be a number above 0"),
    ("resources", {"mem": -2.5}, "resources.mem: must be a number above 0"),
    ("resources", {"mem": float("inf")}, "resources.mem: must be a number above 0"),
    ("resources", {"ncpus": "2"}, "valid integer"),
    ("resources", {"ncpus": True}, "valid integer"),
    ("resources", {"": 1}, "resources"),
    ("select", {"ncpus": ">=many"}, "select.ncpus: >= needs a number"),
    ("exclusive", "yes", "valid boolean"),
    ("colour", "red", "Extra inputs are not permitted"),
])
def test_a_bad_bundle_item_is_refused_with_the_field_named(field, value, said):
    doc = {"id": "j1", "kind": "bundles", "count": 4, "resources": {"ncpus": 1}, field: value}
    with pytest.raises(ValidationError, match=said) as err:
        BundleItem.model_validate(doc)
    assert field in str(err.value)


def test_a_bundle_item_is_frozen():
    item = BundleItem(id="j1", count=1, resources={"ncpus": 1})
    with pytest.raises(ValidationError):
        item.count = 2  # type: ignore[misc]
