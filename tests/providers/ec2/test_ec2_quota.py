"""describe reports the vCPUs left of the account's On-Demand standard quota where the account allows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from providers.contract import parse_output
from providers.ec2 import quota as quota_module
from providers.ec2.clients import Clients
from providers.ec2.describe import describe
from providers.ec2.quota import STANDARD_QUOTA, standard
from providers.ec2.settings import parse as parse_settings
from tests.support.ec2.world import CREDENTIALS, IMAGE, Moto

SETTINGS = parse_settings(
    "region: us-east-1\ncluster: prod-a\ntemplates:\n"
    "  - {id: c6i-4x, instance_type: c6i.4xlarge, image_id: ami-1, subnets: [subnet-a], max_number: 5}\n"
    "  - {id: m6i-l, instance_type: m6i.large, image_id: ami-1, subnets: [subnet-a], max_number: 5}\n"
    "  - {id: spot, instance_type: c6i.4xlarge, image_id: ami-1, subnets: [subnet-a], max_number: 5,"
    " market: spot}\n"
    "  - {id: gpu, instance_type: g5.xlarge, image_id: ami-1, subnets: [subnet-a], max_number: 5}\n",
    Path("/nonexistent/ec2.yaml"))
VCPUS = {"c6i.4xlarge": 16, "m6i.large": 2, "g5.xlarge": 4, "t3.micro": 2}


@pytest.fixture(autouse=True)
def fresh_log(monkeypatch):
    """Each test starts as a new process would: nothing said yet."""
    monkeypatch.setattr(quota_module, "_told", set())


def denied(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)


class FakeEc2:
    def __init__(self, running: list[dict[str, Any]]) -> None:
        self.running = running
        self.asked: list[dict[str, Any]] = []

    def describe_subnets(self, **params: Any) -> dict[str, Any]:
        return {"Subnets": [{"SubnetId": s, "AvailabilityZone": "us-east-1a"} for s in params["SubnetIds"]]}

    def describe_instances(self, **params: Any) -> dict[str, Any]:
        self.asked.append(params)
        return {"Reservations": [{"Instances": self.running}]}

    def describe_instance_types(self, **params: Any) -> dict[str, Any]:
        return {"InstanceTypes": [{"InstanceType": t, "VCpuInfo": {"DefaultVCpus": VCPUS[t]}}
                                  for t in params["InstanceTypes"]]}


class FakeQuotas:
    def __init__(self, value: float | None = None, error: Exception | None = None) -> None:
        self.value, self.error = value, error
        self.asked: list[dict[str, Any]] = []

    def get_service_quota(self, **params: Any) -> dict[str, Any]:
        self.asked.append(params)
        if self.error is not None:
            raise self.error
        return {"Quota": {"ServiceCode": "ec2", "QuotaCode": STANDARD_QUOTA, "Value": self.value}}


def test_the_quota_left_is_the_quota_less_every_on_demand_standard_instance_running_in_the_account():
    running = [{"InstanceType": "c6i.4xlarge"},  # 16, someone else's or ours: all count
               {"InstanceType": "m6i.large"},  # 2
               {"InstanceType": "c6i.4xlarge", "InstanceLifecycle": "spot"},  # spot: another quota
               {"InstanceType": "g5.xlarge"}]  # G family: another quota
    ec2, quotas = FakeEc2(running), FakeQuotas(value=64.0)
    out = describe(SETTINGS, Clients(ec2=ec2, quotas=quotas), {})
    assert out["quota"] == {"vcpus": 46, "templates": ["c6i-4x", "m6i-l"]}
    assert [(t["id"], t.get("vcpus")) for t in out["templates"]] == [
        ("c6i-4x", 16), ("m6i-l", 2), ("spot", None), ("gpu", None)]
    assert out["message"].endswith("; On-Demand standard vCPUs: 46 left of 64")
    assert quotas.asked == [{"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"}]
    assert ec2.asked == [{"Filters": [{"Name": "instance-state-name", "Values": ["pending", "running"]}]}]
    parsed = parse_output("v2", "hosts", "describe", out, provider="aws")
    assert parsed.quota is not None and (parsed.quota.vcpus, parsed.quota.templates) == (46, ["c6i-4x", "m6i-l"])


def test_more_running_than_the_quota_leaves_none():
    out = describe(SETTINGS, Clients(ec2=FakeEc2([{"InstanceType": "c6i.4xlarge"}] * 3), quotas=FakeQuotas(32.0)),
                   {})
    assert out["quota"]["vcpus"] == 0


def test_a_quota_the_account_may_not_read_is_not_reported_and_describe_still_answers_saying_why_once():
    said: list[str] = []
    clients = Clients(ec2=FakeEc2([]), quotas=FakeQuotas(error=denied("GetServiceQuota")), log=said.append)
    first = describe(SETTINGS, clients, {})
    again = describe(SETTINGS, clients, {})
    for out in (first, again):
        assert "quota" not in out and all("vcpus" not in t for t in out["templates"])
        assert [t["id"] for t in out["templates"]] == ["c6i-4x", "m6i-l", "spot", "gpu"]
    assert said == ["describe: no vCPU quota reported: GetServiceQuota: AccessDeniedException: not authorized"]


def test_instance_types_the_account_may_not_describe_mean_no_quota():
    class NoTypes(FakeEc2):
        def describe_instance_types(self, **params: Any) -> dict[str, Any]:
            raise denied("DescribeInstanceTypes")

    said: list[str] = []
    out = describe(SETTINGS, Clients(ec2=NoTypes([]), quotas=FakeQuotas(64.0), log=said.append), {})
    assert "quota" not in out and said[0].startswith("describe: no vCPU quota reported: DescribeInstanceTypes")


def test_no_template_under_the_standard_quota_asks_nothing_of_service_quotas():
    settings = parse_settings(
        "region: us-east-1\ncluster: prod-a\ntemplates:\n"
        "  - {id: gpu, instance_type: g5.xlarge, image_id: ami-1, subnets: [subnet-a], max_number: 5}\n",
        Path("/nonexistent/ec2.yaml"))
    quotas = FakeQuotas(64.0)
    assert "quota" not in describe(settings, Clients(ec2=FakeEc2([]), quotas=quotas), {})
    assert quotas.asked == []


@pytest.mark.parametrize(("kind", "is_standard"), [
    ("m6i.large", True), ("c7gn.xlarge", True), ("t3.micro", True), ("r7iz.large", True), ("im4gn.large", True),
    ("z1d.large", True), ("a1.large", True), ("d3.xlarge", True), ("h1.2xlarge", True),
    ("g5.xlarge", False), ("p4d.24xlarge", False), ("x2idn.16xlarge", False), ("inf2.xlarge", False),
    ("dl1.24xlarge", False), ("trn1.2xlarge", False), ("mac2.metal", False), ("hpc7g.4xlarge", False),
    ("u-6tb1.metal", False), ("vt1.3xlarge", False), ("f1.2xlarge", False),
])
def test_which_families_are_standard(kind, is_standard):
    assert standard(kind) is is_standard


# --- on moto ---------------------------------------------------------------------------------------

#: A region no other test launches in: what runs there is this module's alone.
QUOTA_REGION = "eu-west-3"


def moto_client(moto: Moto, service: str) -> Any:
    return boto3.client(service, region_name=QUOTA_REGION, endpoint_url=moto.url,
                        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])


def moto_settings(subnet: str):
    return parse_settings(
        f"region: {QUOTA_REGION}\ncluster: quota\ntemplates:\n"
        f"  - {{id: c6i-4x, instance_type: c6i.4xlarge, image_id: {IMAGE}, subnets: [{subnet}], max_number: 5}}\n",
        Path("/nonexistent/ec2.yaml"))


@pytest.fixture
def region(moto: Moto):
    """A subnet of the quota region, and the region's instances ended afterwards."""
    ec2 = moto_client(moto, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.43.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.43.0.0/24", AvailabilityZone=f"{QUOTA_REGION}a")["Subnet"]
    yield ec2, subnet["SubnetId"]
    ids = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    if ids:
        ec2.terminate_instances(InstanceIds=ids)


def test_on_moto_the_running_vcpus_come_from_the_accounts_instances_and_their_types(moto, region):
    ec2, subnet = region
    ec2.run_instances(ImageId=IMAGE, InstanceType="c6i.4xlarge", MinCount=2, MaxCount=2, SubnetId=subnet)
    ec2.run_instances(ImageId=IMAGE, InstanceType="t3.micro", MinCount=1, MaxCount=1, SubnetId=subnet)
    out = describe(moto_settings(subnet), Clients(ec2=ec2, quotas=FakeQuotas(64.0)), {})
    assert out["quota"] == {"vcpus": 64 - 2 * 16 - 2, "templates": ["c6i-4x"]}
    assert out["templates"][0]["vcpus"] == 16


def test_on_moto_whose_service_quotas_knows_no_ec2_quota_describe_reports_none(moto, region):
    ec2, subnet = region
    said: list[str] = []
    out = describe(moto_settings(subnet), Clients(ec2=ec2, quotas=moto_client(moto, "service-quotas"),
                                                  log=said.append), {})
    assert "quota" not in out and out["templates"][0]["id"] == "c6i-4x"
    assert len(said) == 1 and said[0].startswith("describe: no vCPU quota reported: GetServiceQuota: NoSuchResource")
