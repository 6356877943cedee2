"""POST /v1/reload: an operator's, answered with what changed, or 409 with why the file was refused."""

from __future__ import annotations

OK = {"ok": True, "config": "/etc/provisioner/provisioner.yaml", "changes": ["provider units: now served here"],
      "restart_needed": [], "errors": []}
BAD = {"ok": False, "config": "/etc/provisioner/provisioner.yaml", "changes": [], "restart_needed": [],
       "errors": ["provisioner.yaml:12: policy.idle_time: not a duration: '1 hour'", "provisioner.yaml:20: x: y"]}


def test_reload_answers_what_changed(inprocess):
    asked = []
    run = inprocess(reload=lambda: asked.append(1) or OK)
    r = run.call("POST", "/v1/reload")
    assert r.status_code == 200 and r.json() == OK and asked == [1]


def test_an_invalid_file_is_a_409_naming_its_problems(inprocess):
    run = inprocess(reload=lambda: BAD)
    r = run.call("POST", "/v1/reload")
    assert r.status_code == 409
    assert r.json()["error"] == ("config not reloaded, the running one stays: provisioner.yaml:12: "
                                 "policy.idle_time: not a duration: '1 hour' (1 more)")
    assert [f["message"] for f in r.json()["fields"]] == BAD["errors"]


def test_only_operators_reload_and_a_server_without_a_config_says_so(inprocess):
    run = inprocess(reload=lambda: OK)
    assert run.call("POST", "/v1/reload", role="viewer").status_code == 403
    assert run.call("POST", "/v1/reload", role="scheduler").status_code == 403
    assert inprocess().call("POST", "/v1/reload").status_code == 404
