"""A seeded, varied fact log for the snapshot tests: every record kind, walked through its state machine.

Most transitions are legal (taken from the tables in ``messages/states.py``);
some are not, and some name records that do not exist, so the log also holds
facts a projection skips as anomalies.
"""

from __future__ import annotations

import random
from typing import Any

from messages.description import Pool, ProviderDescription, Template
from messages.facts import (
    BudgetEvent,
    Chosen,
    Decision,
    Fact,
    GrantChanged,
    InstanceChanged,
    InstanceSeen,
    LeaseChanged,
    Order,
    ProviderAdmin,
    ProviderDescribed,
    ProviderReconfigured,
    RequestChanged,
    RequestPlanned,
    ResourceTotalChanged,
    UsageObserved,
    make_fact,
)
from messages.states import GRANT, INSTANCE, REQUEST

HOSTS = ("a", "b")
UNITS = "u"

_INSTANCE_KIND = {"orphaned": "instance_orphan_found", "requested": "instance_provisioning"}
_GRANT_KIND = {"granted": "grant_granted", "orphaned": "grant_orphan_found", "return_planned": "grant_return_planned",
               "returning": "grant_returning", "returned": "grant_returned", "failed": "grant_failed"}
_REQUEST_KIND = {"submitted": "request_submitted", "failed": "request_failed", "timed_out": "request_timed_out"}


def varied_log(seed: int, steps: int = 600) -> list[Fact]:
    rnd = random.Random(seed)
    #: (provider, payload, fact id or "" for a generated one)
    out: list[tuple[str, Any, str]] = []
    requests: dict[str, tuple[str, str]] = {}  # id -> (provider, state)
    instances: dict[tuple[str, str], str] = {}  # (provider, machine) -> state
    grants: dict[str, str] = {}

    def add(provider: str, payload: Any, fact_id: str = "") -> None:
        out.append((provider, payload, fact_id))

    def nxt(machine: Any, state: str | None) -> str:
        targets = list(machine.edges.get(state, {})) if state else list(machine.initial)
        if not targets or rnd.random() < 0.05:
            return rnd.choice(sorted(machine.states))  # sometimes illegal: the projection must skip it
        return rnd.choice(targets)

    for name in (*HOSTS, UNITS):
        kind = "units" if name == UNITS else "hosts"
        add(name, ProviderDescribed(description=ProviderDescription(
            name=name, kind=kind, cost_per_hour=1.5, priority=1,
            templates=[Template(id="t", max_number=50, cost_per_hour=2.0)] if kind == "hosts" else [],
            pools=[Pool(resource="vcs", capacity=20, cost_per_unit_hour=0.5)] if kind == "units" else [])))
        add(name, LeaseChanged(kind="lease_acquired", name=f"provider:{name}", holder="d1", fence=1))
    add(UNITS, ResourceTotalChanged(resource="vcs", base=10, borrowed=0, total=10))
    add("", LeaseChanged(kind="lease_acquired", name="planner", holder="d1", fence=1))
    for n in range(steps):
        roll = rnd.random()
        if roll < 0.15:
            prov = rnd.choice((*HOSTS, UNITS))
            supply = "units" if prov == UNITS else "hosts"
            extra = {"resource": "vcs"} if supply == "units" else {"template": "t"}
            item = f"d{n % 7}"
            add(prov, Order(action="request", supply=supply, item_id=item, count=rnd.randint(1, 4), **extra), f"o{n}")
            add("", Decision(item=item, demand_seq=n, need=3, chosen=[Chosen(provider=prov, count=1, **extra)]))
            if rnd.random() < 0.8:
                add(prov, RequestPlanned(action="request", supply=supply, order_id=f"o{n}", count=2, item_id=item,
                                         **extra), f"r{n}")
                requests[f"r{n}"] = (prov, "planned")
                if supply == "units":
                    grants[f"r{n}"] = "requested"
        elif roll < 0.3 and requests:
            rid = rnd.choice(sorted(requests))
            prov, state = requests[rid]
            to = nxt(REQUEST, state)
            add(prov, RequestChanged(kind=_REQUEST_KIND.get(to, "request_status"), request_id=rid, state=to,
                                     provider_request_id=f"pr-{rid}", reason=rnd.choice(["", "slow"]),
                                     outcome=rnd.choice([None, "transient"])))
            if REQUEST.allowed(state, to):
                requests[rid] = (prov, to)
        elif roll < 0.45 and requests:
            rid = rnd.choice(sorted(requests))
            prov = requests[rid][0]
            if prov != UNITS:
                state = nxt(INSTANCE, None)
                add(prov, InstanceSeen(machine_id=f"m{n}", name=f"host{n % 40}", request_id=rid, state=state,
                                       launched_at=float(n), private_ip=f"10.0.0.{n % 250}"))
                if state in INSTANCE.initial:
                    instances[(prov, f"m{n}")] = state
        elif roll < 0.65 and instances:
            prov, machine = rnd.choice(sorted(instances))
            to = nxt(INSTANCE, instances[(prov, machine)])
            add(prov, InstanceChanged(kind=_INSTANCE_KIND.get(to, f"instance_{to}"), machine_id=machine, state=to,
                                      request_id=rnd.choice(["", f"ret{n}"]), reason=rnd.choice(["", "idle too long"]),
                                      event_seq=rnd.choice([None, n])))
            if INSTANCE.allowed(instances[(prov, machine)], to):
                instances[(prov, machine)] = to
        elif roll < 0.78 and grants:
            gid = rnd.choice(sorted(grants))
            to = nxt(GRANT, grants[gid])
            kind = _GRANT_KIND.get(to, "grant_granted")
            if to == "granted" and grants[gid] in ("return_planned", "returning"):
                kind = rnd.choice(["grant_part_returned", "grant_return_timed_out"])
            add(UNITS, GrantChanged(kind=kind, grant_id=gid, resource="vcs", state=to, count=rnd.randint(1, 3),
                                    request_id=rnd.choice(["", f"ret{n}"])))
            if GRANT.allowed(grants[gid], to):
                grants[gid] = to
        elif roll < 0.82:
            add(UNITS, GrantChanged(kind="grant_orphan_found", grant_id=f"orphan{n}", resource="vcs", state="orphaned",
                                    count=2, reason="held but unknown"))
            grants[f"orphan{n}"] = "orphaned"
        elif roll < 0.9:
            add(UNITS, UsageObserved(resource="vcs", in_use=rnd.randint(0, 12)))
        elif roll < 0.93:
            add(UNITS, ResourceTotalChanged(resource="vcs", base=10, borrowed=rnd.randint(0, 5), total=12))
        elif roll < 0.95:
            add("", BudgetEvent(limit="max_hosts", detail=f"cut to {n % 5}"))
        elif roll < 0.97:
            admin = rnd.choice(["provider_paused", "provider_resumed", "provider_reconfigured"])
            add(rnd.choice(HOSTS), ProviderReconfigured(changed=["script"]) if admin == "provider_reconfigured"
                else ProviderAdmin(kind=admin, reason="ops"))
        elif roll < 0.98:
            prov = rnd.choice(HOSTS)
            add(prov, LeaseChanged(kind="lease_acquired", name=f"provider:{prov}", holder="d2", fence=n + 2))
        else:
            add("a", RequestChanged(kind="request_status", request_id="nowhere", state="submitted"))
    return [make_fact(payload, provider=prov, fact_id=fact_id or f"f{seq}", now=1000.0 + seq * 7.25)
            .model_copy(update={"seq": seq}) for seq, (prov, payload, fact_id) in enumerate(out, start=1)]
