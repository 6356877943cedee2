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
"""

from __future__ import annotations

import hashlib
from typing import Any

from providers.ec2.clients import Clients
from providers.ec2.errors import CAPACITY, CAPACITY_CODES, CONFIG, ProviderError, aws_code, capacity_like
from providers.ec2.inputs import RequestIn, read
from providers.ec2.instances import CLUSTER_TAG, TEMPLATE_TAG, TOKEN_TAG, Instance, by_token, launch_result, machine
from providers.ec2.request_ids import Launch
from providers.ec2.settings import Settings, TemplateSettings


def request(settings: Settings, clients: Clients, doc: Any) -> dict[str, Any]:
    req = read(RequestIn, doc)
    t = settings.template(req.template)
    if t is None:
        known = ", ".join(x.id for x in settings.templates)
        raise ProviderError(CONFIG, f"templates: no template {req.template!r} (known: {known})")
    request_id = str(Launch(req.token, req.count))
    already = by_token(clients, settings, req.token)
    if already:
        return {"requestId": request_id,
                "message": f"token seen before: its {len(already)} instances are already launched, none launched now"}
    refused: list[tuple[str, str]] = []
    for subnet in t.subnets:
        try:
            answer = clients.call("run_instances", **run_params(settings, t, req, subnet))
        except Exception as exc:
            if not capacity_like(exc):
                raise
            refused.append((subnet, aws_code(exc)))
            clients.log(f"request {req.token}: {aws_code(exc)} in {subnet}, trying the next subnet")
            continue
        ids = [i["InstanceId"] for i in answer.get("Instances", [])]
        zone = (answer.get("Instances") or [{}])[0].get("Placement", {}).get("AvailabilityZone", "")
        return {"requestId": request_id,
                "message": f"{len(ids)} {t.instance_type} launching in {subnet} {zone}: {' '.join(ids)}".strip()}
    # Only "not offered in this zone" everywhere is the settings' fault; any shortage is capacity.
    capacity = any(code in CAPACITY_CODES for _, code in refused)
    said = "; ".join(f"{subnet}: {code}" for subnet, code in refused)
    raise ProviderError(CAPACITY if capacity else CONFIG,
                        f"template {t.id}: no subnet could launch {req.count} {t.instance_type}: {said}")


def client_token(token: str, subnet: str) -> str:
    """At most 64 ASCII characters, as EC2 requires; the same for the same token and subnet."""
    return "prov-" + hashlib.sha256(f"{token}\0{subnet}".encode()).hexdigest()[:48]


def run_params(settings: Settings, t: TemplateSettings, req: RequestIn, subnet: str) -> dict[str, Any]:
    tags = {"Name": f"{settings.cluster}-{t.id}", **req.tags,
            CLUSTER_TAG: settings.cluster, TOKEN_TAG: req.token, TEMPLATE_TAG: t.id}
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    params: dict[str, Any] = {
        "ImageId": t.image_id,
        "InstanceType": t.instance_type,
        "MinCount": req.count,
        "MaxCount": req.count,
        "SubnetId": subnet,
        "ClientToken": client_token(req.token, subnet),
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
    if t.user_data is not None:
        params["UserData"] = t.user_data
    if t.market == "spot":
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    return params


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
