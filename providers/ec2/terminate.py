"""``return``: terminate instances, and follow them until DescribeInstances shows them terminated.

A host counts as returned only once EC2 shows it ``terminated``: until then
it may still cost money, and the daemon must keep it on its books.

EC2 is eventually consistent: an instance launched a moment ago may be
unknown to TerminateInstances (``InvalidInstanceID.NotFound``) although it
runs. Such an id is not "gone": it stays in the return, and ``status``
terminates it as soon as EC2 shows it. Only an id still invisible well after
the return was asked (``CONSISTENCY_GRACE_S``) is taken as gone for good.

Only instances tagged with this cluster are ever terminated: an id the
daemon hands in by mistake, or an instance someone re-tagged, is left alone
and reported as a failed return.

Before it is terminated, an instance is tagged ``provisioner:return=TOKEN``:
that is how ``reclaims`` tells an instance we ended from one that ended
behind our back, when the two cross (the daemon checks for reclaims while a
return of the same host is under way).
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

from providers.ec2.clients import Clients
from providers.ec2.errors import BAD_INPUT, ProviderError, aws_code
from providers.ec2.inputs import MachineRef, ReturnIn, read
from providers.ec2.instances import (
    CLUSTER_TAG,
    ENDING_STATES,
    NODE_TAG,
    RETURN_TAG,
    Instance,
    by_ids,
    cluster_filter,
    find,
    machine,
    ours,
    state,
    tags,
)
from providers.ec2.request_ids import Termination
from providers.ec2.settings import Settings

#: Seconds after a return was asked during which an id EC2 does not show is "not yet", not "gone".
#: Terminated instances stay visible for about an hour, so an id invisible past this never
#: existed or ended long ago: either way it costs nothing.
CONSISTENCY_GRACE_S = 300
#: TerminateInstances takes at most this many ids per call.
TERMINATE_BATCH = 1000


def give_back(settings: Settings, clients: Clients, doc: Any) -> dict[str, Any]:
    req = read(ReturnIn, doc)
    ids = resolve(settings, clients, req.machines)
    seen = by_ids(clients, ids)
    foreign = [i for i in ids if i in seen and not ours(seen[i], settings)]
    ending = [i for i in ids if i in seen and ours(seen[i], settings) and state(seen[i]) in ENDING_STATES]
    live = [i for i in ids if i in seen and ours(seen[i], settings) and state(seen[i]) not in ENDING_STATES]
    unseen = [i for i in ids if i not in seen]
    not_found = end(clients, live, req.token)
    said = [f"terminating {len(live) - len(not_found)}"]
    if ending:
        said.append(f"{len(ending)} already ending")
    if unseen or not_found:
        said.append(f"{len(unseen) + len(not_found)} not visible in EC2 yet (terminated once they are)")
    if foreign:
        said.append(f"{len(foreign)} not tagged {CLUSTER_TAG}={settings.cluster}, left alone: {' '.join(foreign)}")
    return {"requestId": str(Termination(req.token, int(clients.clock()), tuple(ids))), "message": "; ".join(said)}


def resolve(settings: Settings, clients: Clients, machines: list[MachineRef]) -> list[str]:
    """The instance id of every machine; one given by name only is looked up among ours, under the name it is
    reported by: its node's (``provisioner:node``) or, for a host made without one, the ``host_name`` setting's."""
    ids: list[str] = []
    for n, m in enumerate(machines):
        if m.machine_id:
            ids.append(m.machine_id)
            continue
        field = {"private_ip": "private-ip-address"}.get(settings.host_name, "private-dns-name")
        value = m.name if settings.host_name != "short" else f"{m.name}.*"
        candidates = find(clients, [cluster_filter(settings), {"Name": f"tag:{NODE_TAG}", "Values": [m.name]}])
        candidates += [i for i in find(clients, [cluster_filter(settings), {"Name": field, "Values": [value]}])
                       if NODE_TAG not in tags(i)]
        found = [i for i in candidates if state(i) != "terminated"]
        if len(found) != 1:
            raise ProviderError(BAD_INPUT, f"input machines[{n}]: no machineId, and {len(found)} of our "
                                           f"instances are named {m.name!r}")
        ids.append(found[0]["InstanceId"])
    return list(dict.fromkeys(ids))


def end(clients: Clients, ids: list[str], token: str) -> list[str]:
    """Tag ``ids`` as returned under ``token``, then terminate them.

    Answers the ids EC2 said it does not know (yet): those are neither tagged
    nor terminated, and are left for ``status`` to finish.
    """
    tag = [{"Key": RETURN_TAG, "Value": token}]
    not_found = _known_only(clients, "create_tags", "Resources", ids, Tags=tag)
    tagged = [i for i in ids if i not in not_found]
    return not_found + _known_only(clients, "terminate_instances", "InstanceIds", tagged)


def _known_only(clients: Clients, operation: str, ids_param: str, ids: list[str], **params: Any) -> list[str]:
    """Call ``operation`` on ``ids``, leaving out those EC2 says it does not know; answer those."""
    not_found: list[str] = []
    for start in range(0, len(ids), TERMINATE_BATCH):
        batch = ids[start:start + TERMINATE_BATCH]
        while batch:
            try:
                clients.call(operation, **{ids_param: batch}, **params)
                break
            except ClientError as exc:
                if aws_code(exc) != "InvalidInstanceID.NotFound":
                    raise
                # The error names the unknown ids; the call did nothing: again without them.
                named = set(re.findall(r"i-[0-9a-zA-Z]+", str(exc))) & set(batch) or set(batch)
                not_found += [i for i in batch if i in named]
                batch = [i for i in batch if i not in named]
    return not_found


def termination_status(settings: Settings, clients: Clients, ask: Termination,
                       seen: dict[str, Instance]) -> tuple[dict[str, Any], list[str]]:
    """A return's progress, and the ids still to terminate (EC2 did not show them when it was asked)."""
    young = clients.clock() - ask.asked_at < CONSISTENCY_GRACE_S
    machines: list[dict[str, Any]] = []
    still_up: list[str] = []
    for mid in ask.instance_ids:
        i = seen.get(mid)
        if i is None:
            machines.append(_unseen(mid, young))
        elif not ours(i, settings):
            machines.append(machine(i, settings, "fail", f"not tagged {CLUSTER_TAG}={settings.cluster}: left alone"))
        elif state(i) == "terminated":
            machines.append(machine(i, settings, "succeed", "terminated"))
        elif state(i) == "shutting-down":
            machines.append(machine(i, settings, "executing", "shutting down"))
        else:
            still_up.append(mid)
            machines.append(machine(i, settings, "executing", f"{state(i)}: terminating"))
    going = sum(1 for m in machines if m["result"] == "executing")
    failed = [m for m in machines if m["result"] == "fail"]
    if going:
        status, message = "running", f"{going} of {len(machines)} instances not terminated yet"
    elif failed:
        status = "complete_with_error"
        message = f"{len(failed)} of {len(machines)} not returned: {failed[0]['message']}"
    else:
        status, message = "complete", f"{len(machines)} instances terminated"
    return {"requestId": str(ask), "status": status, "message": message, "machines": machines}, still_up


def _unseen(machine_id: str, young: bool) -> dict[str, Any]:
    if young:
        result, status, message = "executing", "unknown", "not visible in EC2 yet"
    else:
        result, status, message = "succeed", "terminated", "no longer known to EC2"
    return {"machineId": machine_id, "name": "", "result": result, "status": status,
            "privateIpAddress": "", "publicIpAddress": "", "launchtime": "", "message": message}
