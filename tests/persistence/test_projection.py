"""The projection: replay gives state; a bad fact is skipped, never raised."""

from bench.ready import fill
from messages.facts import InstanceChanged, InstanceSeen, LeaseChanged, RequestChanged, RequestPlanned, make_fact
from persistence import replay as views
from persistence.controller import open_controller
from state.projection import Projection


def _facts():
    payloads = [
        ("", LeaseChanged(kind="lease_acquired", name="provider:a", holder="d1", fence=3)),
        ("a", RequestPlanned(action="request", supply="hosts", template="t", count=1)),
    ]
    facts = [make_fact(p, provider=prov, now=float(i), fact_id=f"f{i}").model_copy(update={"seq": i + 1})
             for i, (prov, p) in enumerate(payloads)]
    return facts


def test_replay_builds_records_and_history():
    p = Projection()
    facts = _facts()
    p.apply_all(facts)
    seen = make_fact(InstanceSeen(machine_id="m", name="n", request_id="f1", state="provisioning"), provider="a",
                     now=5).model_copy(update={"seq": 3})
    run = make_fact(InstanceChanged(kind="instance_running", machine_id="m", state="running"), provider="a",
                    now=7).model_copy(update={"seq": 4})
    p.apply_all([seen, run])
    assert p.providers["a"].owner == "d1" and p.providers["a"].fence == 3
    inst = p.instances["a/m"]
    assert inst.state == "running" and inst.template == "t"
    assert [c.state for c in inst.history.changes] == ["provisioning", "running"]
    assert p.live_by_name("a") == {"n": inst}
    assert p.requests["f1"].state == "planned"


def test_already_applied_and_illegal_facts_are_skipped_not_raised():
    p = Projection()
    facts = _facts()
    p.apply_all(facts)
    assert not p.apply(facts[1]), "a seq already applied is skipped"
    bad = make_fact(RequestChanged(kind="request_completed", request_id="f1", state="complete"), provider="a",
                    now=9).model_copy(update={"seq": 10})
    assert not p.apply(bad)  # planned -> complete is not an edge
    assert p.requests["f1"].state == "planned"
    assert p.anomalies and "f1" not in p.anomalies[-1] or "skipped" in p.anomalies[-1]
    unknown = make_fact(RequestChanged(kind="request_submitted", request_id="nope", state="submitted"),
                        provider="a", now=9).model_copy(update={"seq": 11})
    assert not p.apply(unknown)
    assert p.seq == 11
    # Many at once: only those applied are counted (a seen seq, an illegal edge, an unknown request are not).
    good = make_fact(RequestChanged(kind="request_submitted", request_id="f1", state="submitted",
                                    provider_request_id="pr"), provider="a", now=12).model_copy(update={"seq": 12})
    again = Projection()
    assert again.apply_all([*facts, facts[1], bad, unknown, good]) == 3
    assert again.requests["f1"].state == "submitted" and again.seq == 12


def test_a_repeated_attempt_counts_without_changing_state():
    p = Projection()
    p.apply_all(_facts())
    note = make_fact(RequestChanged(kind="request_status", request_id="f1", state="planned", outcome="transient",
                                    reason="throttled"), provider="a", now=3).model_copy(update={"seq": 3})
    p.apply(note)
    req = p.requests["f1"]
    assert req.state == "planned" and req.attempts == 1 and req.last_attempt_at == 3 and req.reason == "throttled"


def test_indexes_follow_what_is_still_in_motion():
    from messages.facts import Order

    p = Projection()
    rows = [
        ("a", Order(action="request", supply="hosts", template="t", count=1), "o1"),
        ("a", RequestPlanned(action="request", supply="hosts", order_id="o1", template="t", count=1), "o1.1"),
        ("a", InstanceSeen(machine_id="m", name="n", request_id="o1.1", state="provisioning"), None),
        ("a", InstanceChanged(kind="instance_running", machine_id="m", state="running"), None),
        ("a", RequestChanged(kind="request_submitted", request_id="o1.1", state="submitted"), None),
        ("a", RequestChanged(kind="request_completed", request_id="o1.1", state="complete"), None),
    ]
    for i, (prov, payload, fid) in enumerate(rows):
        p.apply(make_fact(payload, provider=prov, now=float(i), fact_id=fid).model_copy(update={"seq": i + 1}))
        if i == 0:
            assert [o.id for o in p.open().orders] == ["o1"]
        if i == 1:
            assert p.open().orders == [] and [r.id for r in p.open().requests] == ["o1.1"]
    orders, requests, instances, grants = p.open()
    assert orders == [] and requests == [] and [i.key for i in instances] == ["a/m"] and grants == []
    assert [i.key for i in p.instances_in("running")] == ["a/m"] and p.instances_in("provisioning") == []
    p.apply(make_fact(InstanceChanged(kind="instance_lost", machine_id="m", state="lost"), provider="a",
                      now=9).model_copy(update={"seq": 9}))
    assert p.open().instances == [] and p.instances_in("running") == [] and p.instances["a/m"].state == "lost"


def test_a_return_planned_again_points_the_host_at_the_new_return_request():
    """Else the owner sees the old request's failure as fresh and plans the return on every reconcile."""
    p = Projection()
    p.apply_all(_facts())
    steps = [
        InstanceSeen(machine_id="m", name="n", request_id="f1", state="running"),
        InstanceChanged(kind="instance_idle", machine_id="m", state="idle"),
        InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned", request_id="r1"),
        InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned", request_id="r2"),
    ]
    p.apply_all([make_fact(s, provider="a", now=10.0 + i).model_copy(update={"seq": 3 + i})
                 for i, s in enumerate(steps)])
    inst = p.instances["a/m"]
    assert inst.state == "return_planned" and inst.return_request_id == "r2"


def _instance_through(*changes: tuple[str, str]):
    """An instance seen running at t=1, then moved through (state, reason) at t=2, 3, ..."""
    p = Projection()
    facts = [make_fact(InstanceSeen(machine_id="m", name="h", state="running", reason="seen"), provider="a", now=1.0)]
    kinds = {"orphaned": "instance_orphan_found"}
    facts += [make_fact(InstanceChanged(kind=kinds.get(state, f"instance_{state}"), machine_id="m", state=state,
                                        reason=reason), provider="a", now=2.0 + i)
              for i, (state, reason) in enumerate(changes)]
    p.apply_all(f.model_copy(update={"seq": i + 1}) for i, f in enumerate(facts))
    return p.instances["a/m"]


def test_an_instances_times_and_reason_are_read_from_its_history():
    inst = _instance_through(("joined", ""), ("idle", ""), ("busy", "job"), ("idle", ""))
    assert inst.seen_at == 1.0 and inst.joined_at == 2.0, "idle and busy after a join do not move it"
    assert inst.ended_at is None and inst.reason == "job", "the last reason given, not the last change's empty one"
    assert _instance_through(("idle", ""), ("busy", ""), ("idle", "")).joined_at == 2.0, \
        "the first idle when no join was seen"
    assert _instance_through(("orphaned", "late"), ("joined", "")).joined_at == 3.0, "an orphan that joins late"
    assert _instance_through().joined_at is None
    ended = _instance_through(("joined", ""), ("return_planned", "idle too long"), ("returning", ""), ("returned", ""))
    assert ended.ended_at == 5.0 and ended.reason == "idle too long" and ended.joined_at == 2.0
    assert _instance_through().reason == "seen"


def test_a_replay_in_pages_reads_every_fact_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'log.db'}"
    fill(url, 2 * views.PAGE + 8)  # two whole pages and a part of a third
    c = open_controller(url)
    try:
        whole = Projection()
        whole.apply_all(c.read(limit=10 * views.PAGE))
        paged = Projection()
        assert views.catch_up(paged, c) == whole.seq == c.last_seq()
        assert paged.seq == whole.seq
        assert [(k, r.state) for k, r in paged.instances.items()] == [(k, r.state) for k, r in whole.instances.items()]
        assert views.catch_up(paged, c) == 0, "nothing new: nothing read"
    finally:
        c.close()
