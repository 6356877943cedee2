"""``request``: launch a template's instances, at most once per token; and how far a launch has got.

Two defences keep a repeated token from launching twice, because the daemon
repeats a token whenever it cannot know whether the first call took effect
(a timeout, a crash, a failover):

1. Before launching, the instances tagged ``provisioner:token=TOKEN`` are
   looked up. Found means launched: the same requestId is answered, nothing
   is launched. This works across zones and on endpoints that ignore
   ``ClientToken``.
2. RunInstances carries a ``ClientToken`` derived from the token and the
   subnet. It covers the moment right after a launch, before the tag search
   shows the new instances (EC2 is eventually consistent). EC2 dedupes a
   client token only within one zone, and a different subnet is a different
   call anyway, so the subnet is part of it.

RunInstances asks for exactly ``count`` (MinCount = MaxCount): a launch gets
all its instances in one subnet or none, so a capacity error leaves nothing
behind and the next subnet starts clean.

A request for a scheduler's named nodes (``names``) is one launch per name,
each instance born with its name (``named``); the same two defences hold
per name.
"""

from __future__ import annotations

import hashlib
from typing import Any

from providers.ec2.clients import Clients
from providers.ec2.errors import CAPACITY, CAPACITY_CODES, CONFIG, ProviderError, aws_code, capacity_like
from providers.ec2.inputs import RequestIn, read
from providers.ec2.instances import (
    CLUSTER_TAG,
    NODE_TAG,
    TEMPLATE_TAG,
    TOKEN_TAG,
    Instance,
    by_token,
    launch_result,
    machine,
    tags,
)
from providers.ec2.node_names import user_data
from providers.ec2.request_ids import Launch
from providers.ec2.settings import Settings, TemplateSettings

#: Seconds a named request's next RunInstances needs before the deadline: with less, the names left are answered
#: as not launched (the daemon orders them again) rather than the call being killed halfway through one.
NEXT_NAME_S = 10.0
#: Names a message lists before it says how many more.
LISTED = 8


def request(settings: Settings, clients: Clients, doc: Any) -> dict[str, Any]:
    req = read(RequestIn, doc)
    t = settings.template(req.template)
    if t is None:
        known = ", ".join(x.id for x in settings.templates)
        raise ProviderError(CONFIG, f"templates: no template {req.template!r} (known: {known})")
    where = f"templates[{settings.templates.index(t)}].user_data_file"
    if req.names is not None:
        return named(settings, clients, req, t, where)
    data = user_data(t.user_data, None, where)
    request_id = str(Launch(req.token, req.count))
    already = by_token(clients, settings, req.token)
    if already:
        return {"requestId": request_id,
                "message": f"token seen before: its {len(already)} instances are already launched, none launched now"}
    subnet, instances = run(settings, clients, t, req, None, data)
    ids = [i["InstanceId"] for i in instances]
    zone = (instances or [{}])[0].get("Placement", {}).get("AvailabilityZone", "")
    return {"requestId": request_id,
            "message": f"{len(ids)} {t.instance_type} launching in {subnet} {zone}: {' '.join(ids)}".strip()}


def named(settings: Settings, clients: Clients, req: RequestIn, t: TemplateSettings, where: str) -> dict[str, Any]:
    """A request for a scheduler's named nodes: one RunInstances per name, each instance born with its name.

    One RunInstances gives all its instances the same tags and user data, so
    each name has a launch of its own (MinCount = MaxCount = 1), with the
    name in its tags and user data from the start: no instance is ever
    without its name, as it would be between a launch and a CreateTags
    after it (a crash there leaves a host that registers under no name).

    A repeated token launches only the names none of its instances carry:
    the token's instances are looked up first, as for any request, and a
    name found there (in any state) is not launched again. Each launch
    carries a ``ClientToken`` of its own, from the token, the name and the
    subnet, which covers a repeat that comes before EC2 shows the first
    launch by tag (in the zone where it landed, as for any request; a name
    must not share another's token, or EC2 would answer it with the other's
    instance). A repeat after a call that ended halfway (killed, or a
    transient error) therefore finishes it, and makes nothing twice.

    The names are launched in order, and every user data is made before the
    first launch, so a template that cannot carry a name launches nothing.
    When a name has no room in any subnet, or the deadline is near, the
    names left are not launched, and the answer says so: the requestId
    counts the instances made, so the request completes with those, and the
    daemon orders the names left again. With nothing made at all, it exits
    as an unnamed request would (69 for capacity).
    """
    names = req.names or []
    data = {name: user_data(t.user_data, name, where) for name in names}
    already = by_token(clients, settings, req.token)
    made = {tags(i).get(NODE_TAG, "") for i in already}
    todo = [name for name in names if name not in made]
    count = len(already)
    launched: list[str] = []
    left: list[str] = []
    why = ""
    for n, name in enumerate(todo):
        if count and clients.left() < NEXT_NAME_S:
            left, why = todo[n:], "too near the deadline, the daemon orders them again"
            break
        try:
            subnet, instances = run(settings, clients, t, req, name, data[name])
        except ProviderError as exc:
            if not count or exc.code not in (CAPACITY, CONFIG):
                raise
            left, why = todo[n:], exc.message
            break
        count += len(instances)
        launched += [f"{name} {i['InstanceId']} in {subnet}" for i in instances]
    said = [f"{len(launched)} {t.instance_type} launching: {', '.join(launched)}" if launched else
            f"token seen before: its {len(already)} instances are already launched, none launched now"]
    if launched and already:
        said.append(f"{len(already)} launched before under this token")
    if left:
        said.append(f"{_listed(left)} not launched: {why}")
    return {"requestId": str(Launch(req.token, count)), "message": "; ".join(said)}


def run(settings: Settings, clients: Clients, t: TemplateSettings, req: RequestIn, name: str | None,
        data: bytes | None) -> tuple[str, list[Instance]]:
    """RunInstances in the template's subnets in turn until one has room: (that subnet, the instances)."""
    refused: list[tuple[str, str]] = []
    for subnet in t.subnets:
        try:
            answer = clients.call("run_instances", **run_params(settings, t, req, subnet, name, data))
        except Exception as exc:
            if not capacity_like(exc):
                raise
            refused.append((subnet, aws_code(exc)))
            clients.log(f"request {req.token}: {aws_code(exc)} in {subnet}, trying the next subnet")
            continue
        return subnet, list(answer.get("Instances", []))
    # Only "not offered in this zone" everywhere is the settings' fault; any shortage is capacity.
    capacity = any(code in CAPACITY_CODES for _, code in refused)
    said = "; ".join(f"{subnet}: {code}" for subnet, code in refused)
    what = f"1 {t.instance_type} for {name}" if name is not None else f"{req.count} {t.instance_type}"
    raise ProviderError(CAPACITY if capacity else CONFIG, f"template {t.id}: no subnet could launch {what}: {said}")


def client_token(token: str, subnet: str, name: str | None = None) -> str:
    """At most 64 ASCII characters, as EC2 requires; the same for the same token, subnet and name."""
    key = f"{token}\0{subnet}" if name is None else f"{token}\0{subnet}\0{name}"
    return "prov-" + hashlib.sha256(key.encode()).hexdigest()[:48]


def run_params(settings: Settings, t: TemplateSettings, req: RequestIn, subnet: str, name: str | None,
               data: bytes | None) -> dict[str, Any]:
    """RunInstances' parameters: ``count`` instances, or one for ``name``, whose name then wins over any
    ``Name`` of the daemon's tags."""
    tags = {"Name": f"{settings.cluster}-{t.id}", **req.tags,
            CLUSTER_TAG: settings.cluster, TOKEN_TAG: req.token, TEMPLATE_TAG: t.id}
    if name is not None:
        tags |= {"Name": name, NODE_TAG: name}
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    count = 1 if name is not None else req.count
    params: dict[str, Any] = {
        "ImageId": t.image_id,
        "InstanceType": t.instance_type,
        "MinCount": count,
        "MaxCount": count,
        "SubnetId": subnet,
        "ClientToken": client_token(req.token, subnet, name),
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tag_list},
                              {"ResourceType": "volume", "Tags": tag_list}],
    }
    if t.security_groups:
        params["SecurityGroupIds"] = list(t.security_groups)
    if t.key_name:
        params["KeyName"] = t.key_name
    if t.instance_profile:
        key = "Arn" if t.instance_profile.startswith("arn:") else "Name"
        params["IamInstanceProfile"] = {key: t.instance_profile}
    if data is not None:
        params["UserData"] = data
    if t.market == "spot":
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    return params


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(names[:LISTED]) + more


def launch_status(settings: Settings, launch: Launch, found: list[Instance]) -> dict[str, Any]:
    """A launch's progress from the instances carrying its token.

    Fewer instances than asked for means EC2 does not show them all yet: the
    request keeps running. Machines still starting are listed with result
    ``executing``, so the daemon learns their ids and names early.
    """
    machines = []
    for i in sorted(found, key=lambda i: i["InstanceId"]):
        result, message = launch_result(i)
        machines.append(machine(i, settings, result, message))
    starting = sum(1 for m in machines if m["result"] == "executing")
    failed = [m for m in machines if m["result"] == "fail"]
    if len(machines) < launch.count:
        status, message = "running", f"{len(machines)} of {launch.count} instances visible in EC2 so far"
    elif starting:
        status, message = "running", f"{starting} of {len(machines)} instances starting"
    elif failed:
        status, message = "complete_with_error", f"{len(failed)} of {len(machines)} failed: {failed[0]['message']}"
    else:
        status, message = "complete", f"{len(machines)} instances running"
    return {"requestId": str(launch), "status": status, "message": message, "machines": machines}
