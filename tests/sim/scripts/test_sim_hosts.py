"""Hosts: idempotent requests, lead time, capacity, returns, listing and reclaims."""

from __future__ import annotations

from tests.support.simprov import Sim, hosts_config, live_machines


def test_same_token_is_the_same_request(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    first = sim.request("intent-1", count=3)
    again = sim.request("intent-1", count=3)
    assert again == first
    dump = sim.dump()
    assert len(dump["machines"]) == 3
    assert list(dump["requests"]) == [first]
    other = sim.request("intent-2", count=3)
    assert other != first
    assert len(sim.dump()["machines"]) == 6


def test_token_reused_for_a_different_request_is_refused(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    sim.request("intent-1", count=2)
    r = sim.run("request", {"token": "intent-1", "template": "sim-small", "count": 5})
    assert r.returncode == 65 and "intent-1" in r.stderr
    assert len(sim.dump()["machines"]) == 2


def test_machines_run_after_the_lead_time(tmp_path):
    sim = Sim(tmp_path, hosts_config(lead_time=120))
    rid = sim.request("intent-1", count=2)
    [st] = sim.status(rid)
    assert st["status"] == "running"
    assert [m["result"] for m in st["machines"]] == ["executing", "executing"]
    assert all(m["launchtime"] == int(sim.now) for m in st["machines"])
    sim.set_now(sim.now + 119)
    assert sim.status(rid)[0]["status"] == "running"
    sim.set_now(sim.now + 1)
    [st] = sim.status(rid)
    assert st["status"] == "complete"
    assert [(m["result"], m["status"]) for m in st["machines"]] == [("succeed", "running")] * 2
    names = [m["name"] for m in st["machines"]]
    assert len(set(names)) == 2 and all(n.startswith("sim-") for n in names)
    assert all(m["privateIpAddress"] for m in st["machines"])


def test_unknown_request_id_is_reported_not_fatal(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    rid = sim.request("intent-1")
    known, unknown = sim.status(rid, "req-nobody")
    assert known["requestId"] == rid and known["status"] == "complete"
    assert unknown == {"requestId": "req-nobody", "status": "complete_with_error",
                       "message": "unknown request", "machines": []}


def test_full_template_is_capacity_unavailable(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    sim.request("intent-1", template="sim-large", count=5)
    r = sim.run("request", {"token": "intent-2", "template": "sim-large", "count": 1})
    assert r.returncode == 69 and "capacity unavailable" in r.stderr
    assert len(sim.dump()["machines"]) == 5
    # the other template still has room
    sim.request("intent-3", template="sim-small", count=1)


def test_partial_fit_starts_what_fits_and_fails_the_rest(tmp_path):
    sim = Sim(tmp_path, hosts_config(capacity=4))
    sim.request("intent-1", count=3)
    rid = sim.request("intent-2", template="sim-large", count=3)
    [st] = sim.status(rid)
    assert st["status"] == "complete_with_error"
    results = [m["result"] for m in st["machines"]]
    assert results == ["succeed", "fail", "fail"]
    assert "capacity" in st["machines"][1]["message"]
    assert len(live_machines(sim.dump())) == 4


def test_return_terminates_frees_capacity_and_leaves_list(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    rid = sim.request("intent-1", template="sim-large", count=5)
    held = sim.call("list")["machines"]
    assert len(held) == 5 and {m["template"] for m in held} == {"sim-large"}
    gone = [{"name": m["name"], "machineId": m["machineId"]} for m in held[:2]]
    ret = sim.call("return", {"token": "ret-1", "machines": gone})["requestId"]
    assert sim.call("return", {"token": "ret-1", "machines": gone})["requestId"] == ret
    [st] = sim.status(ret)
    assert st["status"] == "complete"
    assert [(m["result"], m["status"]) for m in st["machines"]] == [("succeed", "terminated")] * 2
    left = {m["machineId"] for m in sim.call("list")["machines"]}
    assert left == {m["machineId"] for m in held[2:]}
    states = {mid: m["state"] for mid, m in sim.dump()["machines"].items()}
    assert [states[g["machineId"]] for g in gone] == ["terminated", "terminated"]
    # the original request still tells its story
    assert [m["status"] for m in sim.status(rid)[0]["machines"]][:2] == ["terminated", "terminated"]
    sim.request("intent-2", template="sim-large", count=2)


def test_return_takes_the_configured_time(tmp_path):
    sim = Sim(tmp_path, hosts_config(return_time=30))
    sim.request("intent-1")
    [m] = sim.call("list")["machines"]
    ret = sim.call("return", {"token": "ret-1", "machines": [{"name": m["name"], "machineId": m["machineId"]}]})
    [st] = sim.status(ret["requestId"])
    assert st["status"] == "running" and st["machines"][0]["status"] == "shutting-down"
    assert len(sim.call("list")["machines"]) == 1
    sim.set_now(sim.now + 30)
    assert sim.status(ret["requestId"])[0]["status"] == "complete"
    assert sim.call("list")["machines"] == []


def test_returning_an_unknown_machine_reports_it_failed(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    sim.request("intent-1")
    [m] = sim.call("list")["machines"]
    ret = sim.call("return", {"token": "ret-1", "machines": [
        {"name": m["name"], "machineId": m["machineId"]}, {"name": "ghost", "machineId": "i-ghost"}]})
    [st] = sim.status(ret["requestId"])
    assert st["status"] == "complete_with_error"
    by_id = {x["machineId"]: x for x in st["machines"]}
    assert by_id[m["machineId"]]["result"] == "succeed"
    assert by_id["i-ghost"]["result"] == "fail" and by_id["i-ghost"]["message"] == "unknown machine"


def test_names_are_never_reused(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    sim.request("intent-1", count=2)
    first = sim.call("list")["machines"]
    sim.call("return", {"token": "ret-1", "machines": [{"name": m["name"]} for m in first]})
    sim.request("intent-2", count=2)
    second = sim.call("list")["machines"]
    assert not {m["name"] for m in first} & {m["name"] for m in second}
    assert not {m["machineId"] for m in first} & {m["machineId"] for m in second}


def test_list_filters_by_tags(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    sim.request("intent-1", count=2, tags={"cluster": "a"})
    sim.request("intent-2", count=1, tags={"cluster": "b"})
    assert len(sim.call("list", {"tags": {"cluster": "a"}})["machines"]) == 2
    assert len(sim.call("list", {"tags": {"cluster": "b"}})["machines"]) == 1
    assert len(sim.call("list", {"tags": {}})["machines"]) == 3


def test_admin_reclaim_is_reported_and_the_machine_is_gone(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    sim.request("intent-1", count=2)
    a, b = sim.call("list")["machines"]
    assert sim.admin("reclaim", a["machineId"])["state"] == "reclaimed"
    held = [{"name": m["name"], "machineId": m["machineId"]} for m in (a, b)]
    out = sim.call("reclaims", {"machines": held})
    assert out == {"requests": [{"machine": a["name"], "machineId": a["machineId"], "gracePeriod": 0}]}
    assert [m["machineId"] for m in sim.call("list")["machines"]] == [b["machineId"]]


def test_reclaims_reports_machines_the_provider_never_had(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    out = sim.call("reclaims", {"machines": [{"name": "lost-1", "machineId": "i-lost"}]})
    assert out["requests"] == [{"machine": "lost-1", "machineId": "i-lost", "gracePeriod": 0}]


def test_spot_reclaim_happens_after_launch(tmp_path):
    sim = Sim(tmp_path, hosts_config(reclaim_rate=1.0, reclaim_after=600, lead_time=60))
    rid = sim.request("intent-1", count=2)
    sim.set_now(sim.now + 60)
    held = [{"name": m["name"], "machineId": m["machineId"]} for m in sim.status(rid)[0]["machines"]]
    assert sim.call("reclaims", {"machines": held})["requests"] == []
    sim.set_now(sim.now + 600)
    assert len(sim.call("reclaims", {"machines": held})["requests"]) == 2
    assert sim.call("list")["machines"] == []


def test_machine_failures_show_after_the_lead_time(tmp_path):
    sim = Sim(tmp_path, hosts_config(machine_fail_rate=1.0, lead_time=30))
    rid = sim.request("intent-1", count=2)
    assert sim.status(rid)[0]["status"] == "running"
    sim.set_now(sim.now + 30)
    [st] = sim.status(rid)
    assert st["status"] == "complete_with_error"
    assert [m["result"] for m in st["machines"]] == ["fail", "fail"]
    assert sim.call("list")["machines"] == []


def test_a_request_for_named_hosts_gives_its_machines_those_names(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    r = sim.run("request", {"token": "intent-1", "template": "sim-small", "count": 2, "names": ["cloud7", "cloud2"]})
    assert r.returncode == 0, r.stderr
    names = sorted(m["name"] for m in sim.dump()["machines"].values())
    assert names == ["cloud2", "cloud7"]
    bad = sim.run("request", {"token": "intent-2", "template": "sim-small", "count": 2, "names": ["cloud9"]})
    assert bad.returncode == 65 and "names: must be 2 distinct non-empty names" in bad.stderr
    assert len(sim.dump()["machines"]) == 2
