"""Warm capacity on dynamic nodes (issue 32): the idle nodes warm rules keep are listed idle and never drained; the
rest idle as busy and are drained as before."""

from __future__ import annotations

from config.load import load_config
from config.models import SlurmConfig
from config.schedule import parse_schedule
from messages.facts import InstanceChanged, InstanceSeen, RequestPlanned, make_fact
from persistence.controller import open_controller
from policy.warm import WarmPolicy, WarmRule
from slurm.drift import Memory, reconcile
from slurm.sync import Sync
from slurm.warm import WarmHold
from state.projection import Projection
from tests.slurm.test_drift import N
from tests.slurm.test_sync import FakeSlurm
from tests.support.policy import T0, feed

DYN = SlurmConfig.model_validate({"partitions": ["dyn"], "drain_after": "30s"})


def host(p: Projection, name: str, state: str = "busy", launched: float = T0, template: str = "t") -> N:
    """A dynamic host of ``aws`` up since ``launched``, ``state`` in the daemon's facts; its node, idle in Slurm."""
    feed(p, "aws", InstanceSeen(machine_id=f"i-{name}", name=name, state="running", private_ip="10.0.0.9",
                                template=template, launched_at=launched), now=launched)
    feed(p, "aws", InstanceChanged(kind=f"instance_{state}", machine_id=f"i-{name}", state=state), now=launched + 1)
    return N(name, flags=frozenset({"DYNAMIC_NORM"}), address="10.0.0.9", hostname=name)


def hold(min_idle: int = 0, min_hosts: int = 0, provider: str | None = None, template: str | None = None,
         lifetimes: dict[str, float] | None = None) -> WarmHold:
    return WarmHold(WarmPolicy((WarmRule(provider, template, min_idle, min_hosts),)), lifetimes or {}, 20.0)


def views(r) -> list[tuple[str, str]]:
    return sorted((h.name, h.state) for h in r.supply.hosts)


def drains(r) -> list[str]:
    return sorted(u.node for u in r.updates if ("state", "drain") in u.fields)


def test_min_idle_holds_the_youngest_idle_nodes_listed_idle_and_undrained_and_drains_the_rest():
    p = Projection()
    nodes = [host(p, "h-1", launched=T0), host(p, "h-2", launched=T0 + 5), host(p, "h-3", launched=T0 + 9)]
    warm = hold(min_idle=2)
    first = reconcile(nodes, p, DYN, {}, T0 + 10, Memory(), warm=warm)
    assert views(first) == [("h-1", "busy"), ("h-2", "idle"), ("h-3", "idle")], "two held ready, the youngest"
    later = reconcile(nodes, p, DYN, {}, T0 + 100, first.memory, warm=warm)
    assert drains(later) == ["h-1"], "only the one beyond min_idle is drained, however long they all idled"
    assert views(later) == [("h-1", "busy"), ("h-2", "idle"), ("h-3", "idle")]


def test_without_warm_rules_every_idle_dynamic_node_is_busy_until_drained():
    p = Projection()
    nodes = [host(p, "h-1"), host(p, "h-2")]
    first = reconcile(nodes, p, DYN, {}, T0 + 10, Memory(), warm=WarmHold())
    assert views(first) == [("h-1", "busy"), ("h-2", "busy")]
    assert drains(reconcile(nodes, p, DYN, {}, T0 + 100, first.memory, warm=WarmHold())) == ["h-1", "h-2"]


def test_a_node_taken_by_work_is_no_longer_held_and_the_hold_moves_to_an_idle_one():
    p = Projection()
    nodes = [host(p, "h-1", launched=T0), host(p, "h-2", launched=T0 + 5), host(p, "h-3", launched=T0 + 9)]
    warm = hold(min_idle=2)
    first = reconcile(nodes, p, DYN, {}, T0 + 10, Memory(), warm=warm)
    busy = [nodes[0], nodes[1], N("h-3", "ALLOCATED", frozenset({"DYNAMIC_NORM"}), "10.0.0.9", "h-3")]
    second = reconcile(busy, p, DYN, {}, T0 + 100, first.memory, warm=warm)
    assert views(second) == [("h-1", "idle"), ("h-2", "idle"), ("h-3", "busy")]
    assert drains(second) == []


def test_min_hosts_counts_the_scopes_other_hosts_and_a_node_drained_for_idling_is_resumed_when_held():
    p = Projection()
    mine = N("h-1", flags=frozenset({"DYNAMIC_NORM", "DRAIN"}), address="10.0.0.9", hostname="h-1",
             reason="provisioner: idle for 40s")
    host(p, "h-1", launched=T0 + 9)
    working = host(p, "h-2")
    nodes = [mine, N("h-2", "ALLOCATED", working.flags, "10.0.0.9", "h-2"), host(p, "h-3", launched=T0 + 5),
             host(p, "h-4", launched=T0 + 1)]
    idled = Memory(idle_since={"h-3": T0, "h-4": T0})
    r = reconcile(nodes, p, DYN, {}, T0 + 100, idled, warm=hold(min_hosts=3))
    assert views(r) == [("h-1", "idle"), ("h-2", "busy"), ("h-3", "idle"), ("h-4", "busy")], \
        "three held: the working one counts, so the two youngest idle ones"
    assert drains(r) == ["h-4"]
    assert [u.argv() for u in r.updates if u.node == "h-1"] == [["update", "nodename=h-1", "state=resume"]], \
        "drained for idling, now held: back in service"
    other = N("h-1", flags=frozenset({"DYNAMIC_NORM", "DRAIN"}), address="10.0.0.9", hostname="h-1",
              reason="provisioner: consolidation")
    r = reconcile([other, *nodes[1:]], p, DYN, {}, T0 + 100, idled, warm=hold(min_hosts=3))
    assert [u for u in r.updates if u.node == "h-1"] == [], "a drain for another reason is not undone"
    assert views(r) == [("h-1", "idle"), ("h-2", "busy"), ("h-3", "idle"), ("h-4", "busy")], \
        "it counts for min_hosts as any of the scope's hosts: one idle node more is held"


def test_a_scope_holds_only_its_own_templates_and_a_host_past_its_max_lifetime_is_not_held():
    p = Projection()
    nodes = [host(p, "h-1", template="big"), host(p, "h-2", template="small"), host(p, "h-3", template="small")]
    r = reconcile(nodes, p, DYN, {}, T0 + 10, Memory(), warm=hold(min_idle=5, provider="aws", template="small"))
    assert views(r) == [("h-1", "busy"), ("h-2", "idle"), ("h-3", "idle")]
    aged = reconcile(nodes, p, DYN, {}, T0 + 10, Memory(),
                     warm=hold(min_idle=5, provider="aws", template="small", lifetimes={"aws": 5.0}))
    assert views(aged) == [("h-1", "busy"), ("h-2", "busy"), ("h-3", "busy")], "their successors are ordered"


def test_a_hold_ends_two_sync_rounds_before_its_schedule_closes_so_the_node_is_drained_first(tmp_path):
    path = tmp_path / "provisioner.yaml"
    path.write_text("instance: {id: a, serves: [aws], planner: true}\ncontroller: {url: 'sqlite:///x'}\n"
                    "providers: [{name: aws, kind: hosts, script: {style: v2, path: /bin/true}}]\n"
                    # T0 is 22:13:20 UTC: the window closes 40 s later
                    "policy: {min_idle: 1, warm_schedule: '08:00-22:14'}\n"
                    "slurm: {partitions: [dyn], drain_after: 5s, sync_every: 10s}\n")
    cfg = load_config(path, check_files=False)
    assert cfg.slurm is not None
    warm = WarmHold.of(cfg)
    assert warm.lookahead == 20.0 and warm.policy.rules[0].schedule == parse_schedule("08:00-22:14")
    p = Projection()
    nodes = [host(p, "h-1")]
    open_ = reconcile(nodes, p, cfg.slurm, {}, T0 + 10, Memory(), warm=warm)
    assert views(open_) == [("h-1", "idle")] and drains(open_) == []
    closing = reconcile(nodes, p, cfg.slurm, {}, T0 + 25, open_.memory, warm=warm)
    assert views(closing) == [("h-1", "busy")] and drains(closing) == ["h-1"], \
        "15 s before the close: drained now, listed busy until it is"


def test_the_sync_service_holds_what_the_configs_min_idle_keeps(tmp_path):
    path = tmp_path / "provisioner.yaml"
    path.write_text(f"instance: {{id: a, serves: [aws], planner: true}}\ncontroller: {{url: 'sqlite:///{tmp_path}/s.db'}}\n"
                    "providers: [{name: aws, kind: hosts, script: {style: v2, path: /bin/true}}]\n"
                    "policy: {min_idle: 1}\nslurm: {partitions: [dyn], drain_after: 0s}\n")
    cfg = load_config(path, check_files=False)
    controller = open_controller(cfg.controller.url)
    try:
        controller.append([make_fact(InstanceSeen(machine_id=f"i-{n}", name=n, state="running", private_ip="10.0.0.9",
                                                  launched_at=T0 + k), provider="aws", now=T0 + k)
                           for k, n in enumerate(["h-1", "h-2"])])
        slurm = FakeSlurm(listed=[N(n, flags=frozenset({"DYNAMIC_NORM"}), address="10.0.0.9", hostname=n)
                                  for n in ("h-1", "h-2")])
        Sync(cfg, controller, slurm, clock=lambda: T0 + 10).round()
        assert sorted((h.name, h.state) for h in controller.get_supply().hosts) == [("h-1", "busy"), ("h-2", "idle")]
        assert [c[:3] for c in slurm.calls if "state=drain" in c] == [["update", "nodename=h-1", "state=drain"]]
    finally:
        controller.close()


def test_min_hosts_counts_the_hosts_of_open_requests_as_the_daemon_does():
    # Three idle hosts and one more requested: a floor of 3 holds two of the idle ones, as the daemon keeps two.
    p = Projection()
    nodes = [host(p, "h-1", launched=T0), host(p, "h-2", launched=T0 + 1), host(p, "h-3", launched=T0 + 2)]
    feed(p, "aws", RequestPlanned(action="request", supply="hosts", template="t", count=1), now=T0 + 5, ids=["r-9"])
    r = reconcile(nodes, p, DYN, {}, T0 + 10, Memory(), warm=hold(min_hosts=3))
    assert views(r) == [("h-1", "busy"), ("h-2", "idle"), ("h-3", "idle")]
