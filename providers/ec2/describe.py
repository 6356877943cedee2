"""``describe``: what the provider offers, from the settings, with the zones EC2 puts its subnets in.

Where the account allows, it also reports the vCPUs left of its On-Demand
standard quota (``providers.ec2.quota``), and the vCPUs each template under
it takes, so the daemon asks for no more hosts than fit.

Prices come from the settings, not from the Pricing API: it is not reachable
from every VPC, and a site's negotiated price is what its budget counts. The
one AWS call, DescribeSubnets, both finds each template's zones and proves
that every subnet exists, so a misspelt subnet disables the provider when it
is described rather than at the first launch, in the middle of a burst.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from providers.ec2.clients import Clients
from providers.ec2.errors import CONFIG, ProviderError, aws_code
from providers.ec2.inputs import DescribeIn, read
from providers.ec2.quota import vcpu_quota
from providers.ec2.settings import Settings


def describe(settings: Settings, clients: Clients, doc: Any) -> dict[str, Any]:
    read(DescribeIn, doc)
    zones = subnet_zones(settings, clients)
    out: dict[str, Any] = {
        "kind": "hosts",
        "region": settings.region,
        "lead_time_s": settings.lead_time_s,
        "templates": [],
    }
    if settings.priority is not None:
        out["priority"] = settings.priority
    if settings.capacity is not None:
        out["capacity"] = settings.capacity
    spread = []
    for t in settings.templates:
        # What its hosts are, for the daemon's metrics by capacity type: the market it launches in.
        entry: dict[str, Any] = {"id": t.id, "max_number": t.max_number,
                                 "attributes": {**t.attributes, "capacity_type": t.market}}
        if t.price_per_hour is not None:
            entry["cost_per_hour"] = t.price_per_hour
        # A template whose subnets span zones has no single zone: it goes where capacity is.
        in_zones = sorted({zones[s] for s in t.subnets})
        if len(in_zones) == 1:
            entry["zone"] = in_zones[0]
        spread.append(f"{t.id} in {', '.join(in_zones)}")
        out["templates"].append(entry)
    out["message"] = f"cluster {settings.cluster}: " + "; ".join(spread)
    quota = vcpu_quota(settings, clients)
    if quota is not None:
        limit, used, sizes = quota
        out["quota"] = {"vcpus": max(0, limit - used), "templates": sorted(sizes)}
        for entry in out["templates"]:
            if entry["id"] in sizes:
                entry["vcpus"] = sizes[entry["id"]]
        out["message"] += f"; On-Demand standard vCPUs: {max(0, limit - used)} left of {limit}"
    return out


def subnet_zones(settings: Settings, clients: Clients) -> dict[str, str]:
    """Subnet id -> availability zone, for every subnet of every template."""
    wanted = sorted({s for t in settings.templates for s in t.subnets})
    try:
        subnets = clients.pages("describe_subnets", "Subnets", SubnetIds=wanted)
    except ClientError as exc:
        if not aws_code(exc).startswith("InvalidSubnetID"):
            raise
        subnets = []
    zones = {s["SubnetId"]: s["AvailabilityZone"] for s in subnets}
    for i, t in enumerate(settings.templates):
        for j, s in enumerate(t.subnets):
            if s not in zones and not _exists(clients, s, zones):
                raise ProviderError(CONFIG, f"templates[{i}].subnets[{j}]: {s} does not exist in {settings.region}")
    return zones


def _exists(clients: Clients, subnet: str, zones: dict[str, str]) -> bool:
    """Asked one at a time once a call for all failed: the error of a call for several may not say which."""
    try:
        found = clients.pages("describe_subnets", "Subnets", SubnetIds=[subnet])
    except ClientError as exc:
        if aws_code(exc).startswith("InvalidSubnetID"):
            return False
        raise
    zones.update({s["SubnetId"]: s["AvailabilityZone"] for s in found})
    return subnet in zones
