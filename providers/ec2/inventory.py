"""``list`` and ``reclaims``: what EC2 holds for us, and what it took back.

Both are how the daemon notices that AWS and its facts disagree. ``list``
feeds its orphan search (ours in EC2, unknown to the facts: returned or
reported) and its loss detection (in the facts, absent from two lists in a
row). ``reclaims`` reports what ended behind our back, with EC2's own
reason, so the daemon stops counting it and plans its need again.

Neither changes anything in EC2: deciding is the daemon's job.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from providers.ec2.clients import Clients
from providers.ec2.errors import aws_code
from providers.ec2.inputs import ListIn, ReclaimsIn, read
from providers.ec2.instances import (
    HELD_STATES,
    RETURN_TAG,
    TEMPLATE_TAG,
    by_ids,
    cluster_filter,
    find,
    host_name,
    machine,
    reason,
    state,
    tags,
)
from providers.ec2.settings import Settings

#: What a list shows a held instance as: starting, up, or there but not usable.
LIST_RESULT = {"pending": "executing", "running": "succeed"}
#: States of an instance that is no longer a usable host.
GONE_STATES = ("shutting-down", "terminated", "stopping", "stopped")
#: Spot request codes of an interruption notice: the instance still runs, for about two minutes.
SPOT_NOTICES = ("marked-for-termination", "marked-for-stop", "marked-for-hibernation")
#: How long EC2 gives a spot instance between its notice and the interruption.
SPOT_NOTICE_S = 120


def holdings(settings: Settings, clients: Clients, doc: Any) -> dict[str, Any]:
    """Every instance of this cluster that still exists, narrowed by the daemon's tags.

    The daemon's tags (``provisioner-provider=NAME``) keep two providers that
    share a cluster tag, in one account, from taking each other's instances
    for orphans. Stopped instances are listed: they still hold their disks.
    """
    req = read(ListIn, doc)
    filters = [cluster_filter(settings), {"Name": "instance-state-name", "Values": list(HELD_STATES)}]
    filters += [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(req.tags.items())]
    machines = []
    for i in sorted(find(clients, filters), key=lambda i: i["InstanceId"]):
        st = state(i)
        m = machine(i, settings, LIST_RESULT.get(st, "fail"), "" if st in LIST_RESULT else f"{st}: {reason(i)}")
        m["templateId"] = tags(i).get(TEMPLATE_TAG, "")
        machines.append(m)
    return {"machines": machines, "grants": []}


def reclaims(settings: Settings, clients: Clients, doc: Any) -> dict[str, Any]:
    """The machines among those given that EC2 ended or is about to end.

    A machine EC2 does not show is not reported: just after a launch that is
    normal, and the daemon's ``list`` catches one that stays away. Nor is one
    we are returning (tagged ``provisioner:return``): its end is ours, and the
    daemon follows it through the return's ``status``.
    """
    req = read(ReclaimsIn, doc)
    given = {m.machine_id: m.name for m in req.machines if m.machine_id}
    seen = by_ids(clients, given)
    out: list[dict[str, Any]] = []
    spot: dict[str, str] = {}
    for mid, name in given.items():
        i = seen.get(mid)
        if i is None or RETURN_TAG in tags(i):
            continue
        st = state(i)
        if st in GONE_STATES:
            out.append({"machine": name or host_name(i, settings), "machineId": mid, "gracePeriod": 0,
                        "message": f"{st}: {reason(i)}".rstrip(": ")})
        elif i.get("SpotInstanceRequestId"):
            spot[i["SpotInstanceRequestId"]] = mid
    for mid, grace, message in spot_notices(clients, spot):
        out.append({"machine": given[mid] or host_name(seen[mid], settings), "machineId": mid,
                    "gracePeriod": grace, "message": message})
    return {"status": "complete", "message": f"{len(out)} of {len(given)} machines taken back", "requests": out}


def spot_notices(clients: Clients, spot: dict[str, str]) -> list[tuple[str, float, str]]:
    """(machine id, seconds left, message) of every spot instance with an interruption notice."""
    if not spot:
        return []
    try:
        found = clients.pages("describe_spot_instance_requests", "SpotInstanceRequests",
                              SpotInstanceRequestIds=sorted(spot))
    except ClientError as exc:
        if aws_code(exc).startswith("InvalidSpotInstanceRequestID"):
            clients.log(f"spot requests not visible yet: {aws_code(exc)}; checked again next time")
            return []
        raise
    out = []
    for r in found:
        status = r.get("Status") or {}
        mid = spot.get(r.get("SpotInstanceRequestId", ""))
        if mid is None or status.get("Code") not in SPOT_NOTICES:
            continue
        grace = float(SPOT_NOTICE_S)
        noticed = status.get("UpdateTime")
        if isinstance(noticed, datetime):
            grace = max(0.0, SPOT_NOTICE_S - (clients.clock() - noticed.timestamp()))
        said = f"spot interruption: {status.get('Code')}: {status.get('Message', '')}".rstrip(": ")
        out.append((mid, float(round(grace)), said))
    return out
