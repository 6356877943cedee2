"""EC2 instances as the script contract shows them, and how they are found.

Instances are always looked up with filters, never by ``InstanceIds``: a
filter that matches nothing answers with nothing, whereas an id EC2 does not
show yet (just after launch: its API is eventually consistent) fails the
whole call with ``InvalidInstanceID.NotFound``. Whether an absence means
"not yet" or "gone" is for the caller to judge, knowing how old its request is.
"""

from __future__ import annotations

from typing import Any, Iterable

from providers.ec2.clients import Clients
from providers.ec2.settings import Settings

CLUSTER_TAG = "provisioner:cluster"
TOKEN_TAG = "provisioner:token"
TEMPLATE_TAG = "provisioner:template"
#: The scheduler's name of the node the instance was made for (also its ``Name``): the name it is reported under.
NODE_TAG = "provisioner:node"
#: Set on an instance just before we terminate it: the token of the return.
RETURN_TAG = "provisioner:return"
#: EC2 takes at most 200 values in one filter.
FILTER_VALUES = 200
#: States in which an instance exists for us: it costs (or, stopped, still holds its disks).
HELD_STATES = ("pending", "running", "stopping", "stopped")
#: States of an instance that is going or gone.
ENDING_STATES = ("shutting-down", "terminated")

Instance = dict[str, Any]


def tags(instance: Instance) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags") or []}


def state(instance: Instance) -> str:
    return str(instance.get("State", {}).get("Name", ""))


def ours(instance: Instance, settings: Settings) -> bool:
    """Whether the instance carries this cluster's tag: nothing else is ever terminated."""
    return tags(instance).get(CLUSTER_TAG) == settings.cluster


def find(clients: Clients, filters: list[dict[str, Any]]) -> list[Instance]:
    reservations = clients.pages("describe_instances", "Reservations", Filters=filters)
    return [i for r in reservations for i in r.get("Instances", [])]


def cluster_filter(settings: Settings) -> dict[str, Any]:
    return {"Name": f"tag:{CLUSTER_TAG}", "Values": [settings.cluster]}


def by_token(clients: Clients, settings: Settings, token: str) -> list[Instance]:
    """Every instance launched for a token, in any state (terminated ones stay visible for a while)."""
    return find(clients, [cluster_filter(settings), {"Name": f"tag:{TOKEN_TAG}", "Values": [token]}])


def by_ids(clients: Clients, ids: Iterable[str]) -> dict[str, Instance]:
    """The instances EC2 shows among ``ids``; an id it does not show is simply absent."""
    wanted = sorted(set(ids))
    found: dict[str, Instance] = {}
    for start in range(0, len(wanted), FILTER_VALUES):
        chunk = wanted[start:start + FILTER_VALUES]
        for i in find(clients, [{"Name": "instance-id", "Values": chunk}]):
            found[i["InstanceId"]] = i
    return found


def host_name(instance: Instance, settings: Settings) -> str:
    """The name the scheduler knows the host by; empty while EC2 has not assigned it.

    A host made for a named node is known by the node's name (it registers under it), whatever
    ``host_name`` says; the daemon binds it to that name by it.
    """
    node = tags(instance).get(NODE_TAG)
    if node:
        return node
    dns = str(instance.get("PrivateDnsName") or "")
    if settings.host_name == "private_ip":
        return str(instance.get("PrivateIpAddress") or "")
    if settings.host_name == "short":
        return dns.split(".", 1)[0]
    return dns


def launched_at(instance: Instance) -> int | str:
    when = instance.get("LaunchTime")
    return int(when.timestamp()) if when is not None else ""


def reason(instance: Instance) -> str:
    """Why an instance is in its state, as EC2 says it (``Server.SpotInstanceTermination: ...``)."""
    said = instance.get("StateReason") or {}
    text = str(said.get("Message") or said.get("Code") or "")
    return text or str(instance.get("StateTransitionReason") or "")


def machine(instance: Instance, settings: Settings, result: str, message: str = "") -> dict[str, Any]:
    """One machine in the contract's shape (getRequestStatus's, also used by ``list``)."""
    return {
        "machineId": instance["InstanceId"],
        "name": host_name(instance, settings),
        "result": result,
        "status": state(instance),
        "privateIpAddress": str(instance.get("PrivateIpAddress") or ""),
        "publicIpAddress": str(instance.get("PublicIpAddress") or ""),
        "launchtime": launched_at(instance),
        "message": message,
    }


def launch_result(instance: Instance) -> tuple[str, str]:
    """(result, message) of an instance of a launch: starting, up, or failed before it was ever used.

    An instance already past running (stopped or terminated) is a failure for
    its request; if the daemon saw it running before, it ignores this and
    learns of the loss from ``reclaims`` instead.
    """
    st = state(instance)
    if st == "pending":
        return "executing", "launching"
    if st == "running":
        return "succeed", ""
    return "fail", f"{st}: {reason(instance)}".rstrip(": ")
