"""A JSON body is taken whatever Content-Type came with it: the documented curl works (issue 20, item 8)."""

from __future__ import annotations

import pytest

from messages.description import ProviderDescription, Template
from messages.facts import ProviderDescribed

AWS = ProviderDescription(name="aws-east", kind="hosts", templates=[Template(id="m5", max_number=5)])


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded", "text/plain"])
def test_drain_as_the_docs_curl_it(inprocess, content_type):
    run = inprocess()
    run.add(ProviderDescribed(description=AWS), provider="aws-east")
    headers = {"content-type": content_type} if content_type else {}
    r = run.call("POST", "/v1/providers/aws-east/drain", content=b'{"reason": "AZ maintenance"}', headers=headers)
    assert r.status_code == 202, r.text
    [fact] = run.written
    assert fact.kind == "provider_drained" and fact.payload.reason == "operator: AZ maintenance (by ops)"


def test_a_demand_put_without_a_json_content_type_is_stored(inprocess):
    run = inprocess()
    r = run.call("PUT", "/v1/demand", role="scheduler", headers={"content-type": "application/x-www-form-urlencoded"},
                 content=b'{"items": [{"id": "d", "kind": "units", "resource": "vcs", "count": 2}]}')
    assert r.status_code == 200, r.text
    assert run.controller.get_demand().items[0].count == 2


def test_a_body_that_is_not_json_is_still_a_clear_422(inprocess):
    run = inprocess()
    run.add(ProviderDescribed(description=AWS), provider="aws-east")
    r = run.call("POST", "/v1/providers/aws-east/drain", content=b"reason=AZ+maintenance",
                 headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "body"
    assert "not valid JSON" in r.json()["error"] and run.written == []
