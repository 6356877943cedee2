"""The account's vCPU quota for On-Demand standard instances, and what of it is left, for ``describe``.

EC2 limits the vCPUs of running On-Demand instances per region and family
group; the group of most templates is "Standard" (families A, C, D, H, I,
M, R, T and Z), Service Quotas code ``L-1216C47A``. What is left is that
quota less the vCPUs of every pending or running On-Demand instance of those
families in the account and region, ours or not (DescribeInstances, with
DescribeInstanceTypes for the vCPUs of each type).

Where the account does not allow it (no ``servicequotas:GetServiceQuota``,
or ``ec2:DescribeInstanceTypes``, a region or endpoint without Service
Quotas), describe reports no quota and still succeeds; why is logged once
per process. GetServiceQuota is asked once and not retried: where Service
Quotas cannot be reached, retries would only hold up the answer. Spot
templates and templates of other families are under other quotas, which
are not read: the quota names the templates it holds for.
"""

from __future__ import annotations

import re

from botocore.exceptions import BotoCoreError, ClientError

from providers.ec2.clients import Clients
from providers.ec2.errors import describe as said
from providers.ec2.settings import Settings, TemplateSettings

#: Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances, in vCPUs.
STANDARD_QUOTA = "L-1216C47A"
_STANDARD = frozenset("acdhimrtz")
#: Families whose names start like a standard one but that have quotas of their own.
_OTHERS = frozenset({"inf", "dl", "hpc", "mac", "trn", "tr", "vt", "u"})
_FAMILY = re.compile(r"[a-z]+")
#: Instance types asked of DescribeInstanceTypes at once (its limit).
_TYPES_PER_CALL = 100
#: Why no quota was reported, once said (a persistent process describes every hour; say it once).
_told: set[str] = set()


def standard(instance_type: str) -> bool:
    """Whether an instance type counts against the standard On-Demand quota (``m6i.large``: yes)."""
    m = _FAMILY.match(instance_type.lower())
    family = m.group(0) if m else ""
    return family[:1] in _STANDARD and family not in _OTHERS


def under_quota(t: TemplateSettings) -> bool:
    return t.market == "on-demand" and standard(t.instance_type)


def vcpu_quota(settings: Settings, clients: Clients) -> tuple[int, int, dict[str, int]] | None:
    """(quota, vCPUs in use, vCPUs per host of each template under it), or None where the account does
    not allow reading them or no template is under it."""
    templates = [t for t in settings.templates if under_quota(t)]
    if not templates or clients.quotas is None:
        return None
    try:
        # Asked once, not retried: where Service Quotas cannot be reached, retries would only delay the answer.
        quota = clients.quotas.get_service_quota(ServiceCode="ec2", QuotaCode=STANDARD_QUOTA)["Quota"]["Value"]
        reservations = clients.pages("describe_instances", "Reservations", Filters=[
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        running = [i["InstanceType"] for r in reservations for i in r.get("Instances", [])
                   if i.get("InstanceLifecycle", "") != "spot" and standard(i.get("InstanceType", ""))]
        sizes = _vcpus(clients, sorted({t.instance_type for t in templates} | set(running)))
    except (ClientError, BotoCoreError) as exc:
        _tell(clients, f"describe: no vCPU quota reported: {said(exc)}")
        return None
    missing = sorted({t.instance_type for t in templates} - sizes.keys())
    if missing:
        _tell(clients, f"describe: no vCPU quota reported: DescribeInstanceTypes does not know {', '.join(missing)}")
        return None
    used = sum(sizes.get(kind, 0) for kind in running)
    return int(quota), used, {t.id: sizes[t.instance_type] for t in templates}


def _vcpus(clients: Clients, types: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in range(0, len(types), _TYPES_PER_CALL):
        chunk = types[k:k + _TYPES_PER_CALL]
        for entry in clients.pages("describe_instance_types", "InstanceTypes", InstanceTypes=chunk):
            vcpus = entry.get("VCpuInfo", {}).get("DefaultVCpus")
            if isinstance(vcpus, int) and vcpus > 0:
                out[entry["InstanceType"]] = vcpus
    return out


def _tell(clients: Clients, line: str) -> None:
    if line not in _told:
        _told.add(line)
        clients.log(line)
