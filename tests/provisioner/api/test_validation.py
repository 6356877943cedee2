"""Bad bodies and parameters: 422 with the field named, nothing stored, the daemon lives on."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

BAD = [
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [{"id": "d1", "kind": "hosts", "count": -1}]}},
     "body.items[0].count", "body.items[0] (id 'd1').count: must be at least 0, got -1"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [{"id": "d1", "kind": "gpus", "count": 1}]}},
     "body.items[0].kind", "body.items[0] (id 'd1').kind: expected one of 'hosts', 'units', 'bundles', got 'gpus'"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [{"id": "d1", "kind": "units", "count": 1}]}},
     "body.items[0].resource", "body.items[0] (id 'd1').resource: missing required field"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [{"id": "j", "kind": "bundles", "count": 2,
                                                            "resources": {"ncpus": 1}, "exclusiv": True}]}},
     "body.items[0].exclusiv", "body.items[0] (id 'j').exclusiv: unknown field (did you mean 'exclusive'?)"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [], "colour": "red"}}, "body.colour",
     "body.colour: unknown field"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [
        {"id": "d1", "kind": "hosts", "count": 1, "select": {"ncpus": ">=many"}}]}}, "body.items[0].select",
     "body.items[0] (id 'd1'): select.ncpus: >= needs a number, got 'many'"),
    ("PUT", "/v1/demand", "scheduler", {"content": b"{\"items\": [", "headers": {"content-type": "application/json"}},
     "body", "body: not valid JSON"),
    ("PUT", "/v1/demand", "scheduler", {"json": [1, 2]}, "body", "body: expected a mapping, got a list"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [
        {"id": "d1", "kind": "hosts", "count": 1, "select": {"ncpus": ""}}]}}, "body.items[0].select",
     "body.items[0] (id 'd1'): select.ncpus: empty selector"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"time": False}}, "body.time",
     "body.time: expected a number, got false"),
    ("PUT", "/v1/demand", "scheduler", {"json": {"items": [{"id": "d1", "kind": "units", "resource": "vcs",
                                                            "count": True}]}}, "body.items[0].count",
     "body.items[0] (id 'd1').count: expected an integer, got true"),
    ("POST", "/v1/hosts/h-1/events", "scheduler", {"json": {"event": "asleep"}}, "body.event",
     "body.event: expected one of 'joined', 'idle', 'busy', got 'asleep'"),
    ("POST", "/v1/hosts/h-1/events", "scheduler", {"json": {}}, "body.event", "body.event: missing required field"),
    ("POST", "/v1/hosts/-bad-name/events", "scheduler", {"json": {"event": "idle"}}, "path.name", "path.name:"),
    ("POST", "/v1/providers/hosts/pause", "operator", {"json": {"reason": 5}}, "body.reason",
     "body.reason: expected text, got 5"),
    ("POST", "/v1/providers/hosts/pause", "operator", {"json": {"reason": "two\nlines"}}, "body.reason",
     "body.reason: not valid: 'two\\nlines' (one line of text, no control characters)"),
    ("POST", "/v1/providers/hosts/drain", "operator", {"json": {"reason": "x" * 501}}, "body.reason",
     "body.reason: must be at most 500 characters, got 501"),
    ("POST", "/v1/instances/hosts/i-1/return", "operator", {"json": {"why": "x"}}, "body.why",
     "body.why: unknown field (known: reason)"),
    ("GET", "/v1/instances", "viewer", {"params": {"limit": 0}}, "query.limit", "query.limit:"),
    ("GET", "/v1/requests", "viewer", {"params": {"limit": "lots"}}, "query.limit", "query.limit:"),
    ("GET", "/v1/audit", "viewer", {"params": {"after": "not-a-hash"}}, "query.after", "query.after:"),
    ("GET", "/v1/instances", "viewer", {"params": {"provder": "hosts"}}, "query.provder", "query.provder:"),
    ("GET", "/v1/instances", "viewer", {"params": [("state", "running"), ("state", "idle")]}, "query.state",
     "query.state:"),
]


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    from tests.support.api import Api, write_tokens
    from tests.support.daemons import HOSTS_SIM, make_config, sim_provider

    tmp = tmp_path_factory.mktemp("validation")
    cfg = make_config(tmp, [sim_provider(tmp, "hosts", HOSTS_SIM)],
                      api={"listen": "127.0.0.1:0", "tokens": str(write_tokens(tmp / "tokens.yaml"))})
    run = Api(cfg, tmp / "home")
    yield run
    run.stop()


@pytest.mark.parametrize("method,path,role,kw,field,said", BAD, ids=[f"{m} {p} {f}" for m, p, _, _, f, _ in BAD])
def test_bad_input_is_422_naming_the_field(api, method, path, role, kw, field, said):
    """The field is the plain JSON path; the line says it in words, a demand item named by its id (it was
    pydantic's ``body.items.0.hosts.count: Input should be greater than or equal to 0``)."""
    def inputs():
        """What callers have written: operators' facts (unfenced), demand, host events."""
        return ([f.id for f in api.controller.read() if f.lease == ""], api.controller.get_demand(),
                api.controller.read_host_events())

    before = inputs()
    r = api.call(method, path, role, **kw)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["fields"][0]["field"] == field and body["error"].startswith(said), body
    assert "Input should" not in body["error"] or not field.startswith("body"), body
    assert inputs() == before, "a refused call stores nothing"
    assert api.get("/healthz", role=None).status_code == 200
