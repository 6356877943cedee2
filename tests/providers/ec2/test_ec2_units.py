"""The EC2 provider's decisions that need no EC2: error classes, request ids, grace periods, retries.

The actions are plain functions of (settings, clients, input), so these call
them in-process with a fake client where moto cannot play the part (a spot
interruption notice, a clock an hour ahead).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, ReadTimeoutError

from providers.ec2 import errors
from providers.ec2.clients import Clients
from providers.ec2.errors import ProviderError, exit_code, scrub
from providers.ec2.inventory import reclaims
from providers.ec2.request_ids import Launch, Termination, parse
from providers.ec2.settings import parse as parse_settings
from providers.ec2.terminate import CONSISTENCY_GRACE_S, termination_status
from providers.environment import secret_name

SETTINGS = parse_settings(
    "region: us-east-1\ncluster: prod-a\ntemplates:\n"
    "  - {id: c6i-4x, instance_type: c6i.4xlarge, image_id: ami-1, subnets: [subnet-a], max_number: 5}\n",
    Path("/nonexistent/ec2.yaml"))


def aws_error(code: str, status: int, operation: str = "RunInstances") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "said by AWS"},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, operation)


@pytest.mark.parametrize("code,status,expected", [
    ("InsufficientInstanceCapacity", 500, 69),   # a 500, yet capacity: never retried as transient
    ("InstanceLimitExceeded", 400, 69),
    ("MaxSpotInstanceCountExceeded", 400, 69),
    ("RequestLimitExceeded", 503, 75),
    ("Throttling", 400, 75),
    ("InternalError", 500, 75),
    ("SomethingNew", 502, 75),
    ("UnauthorizedOperation", 403, 77),
    ("AuthFailure", 401, 77),
    ("InvalidClientTokenId", 403, 77),
    ("InvalidAMIID.NotFound", 400, 78),
    ("InvalidParameterValue", 400, 78),
    ("IdempotentParameterMismatch", 400, 78),
    ("SomethingNew", 400, 1),
])
def test_aws_error_codes_map_to_the_contracts_exit_codes(code, status, expected):
    assert exit_code(aws_error(code, status)) == expected


def test_errors_without_an_aws_answer_map_too():
    assert exit_code(NoCredentialsError()) == errors.CREDENTIALS
    assert exit_code(EndpointConnectionError(endpoint_url="http://127.0.0.1:9")) == errors.TRANSIENT
    assert exit_code(ReadTimeoutError(endpoint_url="http://127.0.0.1:9")) == errors.TRANSIENT
    assert exit_code(ValueError("a bug")) == errors.FAILED


def test_scrub_masks_secrets_and_leaves_key_ids_regions_and_endpoints_alone():
    env = {"AWS_SECRET_ACCESS_KEY": "s3cr3t/value+x", "AWS_SESSION_TOKEN": "tok-123456",
           "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_DEFAULT_REGION": "us-west-2",
           "AWS_ENDPOINT_URL": "https://ec2.us-west-2.amazonaws.com", "PROVISIONER_TOKEN": "intent-0001"}
    text = scrub("key AKIAIOSFODNN7EXAMPLE secret s3cr3t/value+x token tok-123456 at "
                 "https://ec2.us-west-2.amazonaws.com for intent-0001 end", env)
    assert text == "key AKIAIOSFODNN7EXAMPLE secret *** token *** at https://ec2.us-west-2.amazonaws.com " \
                   "for intent-0001 end"


@pytest.mark.parametrize("name", ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                                  "AWS_ACCESS_KEY_ID", "aws_access_key_id", "SECRET_KEY_ID", "DB_PASSWORD",
                                  "GOOGLE_CREDENTIALS", "API_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                                  "EC2_PROVIDER_CONFIG", "AWS_PROFILE", "PROVIDER_API_KEY"])
def test_the_provider_calls_secret_what_the_daemon_does(name):
    assert errors.secret_name(name) is secret_name(name)


def test_the_authorization_blob_is_not_repeated():
    exc = ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "You are not authorized to perform "
                       "this operation. Encoded authorization failure message: AbCdEf123"}}, "RunInstances")
    said = errors.describe(exc)
    assert said == "RunInstances: UnauthorizedOperation: You are not authorized to perform this operation."


def test_request_ids_round_trip_and_name_the_bad_one():
    assert parse(str(Launch("req:with:colons", 3))) == Launch("req:with:colons", 3)
    ask = Termination("ret-1", 1700000000, ("i-1", "i-2"))
    assert parse(str(ask)) == ask
    with pytest.raises(ProviderError) as bad:
        parse("r-8812", "requests[2].requestId")
    assert bad.value.code == errors.BAD_INPUT and bad.value.message.startswith("requests[2].requestId: ")


class FakeEc2:
    """Answers DescribeInstances and DescribeSpotInstanceRequests from lists; raises what it is told."""

    def __init__(self, instances: list[dict[str, Any]] = (), spot: list[dict[str, Any]] = (),
                 fail: list[Exception] = ()) -> None:
        self.instances = list(instances)
        self.spot = list(spot)
        self.fail = list(fail)
        self.calls: list[str] = []

    def describe_instances(self, **_: Any) -> dict[str, Any]:
        self.calls.append("describe_instances")
        if self.fail:
            raise self.fail.pop(0)
        return {"Reservations": [{"Instances": self.instances}]}

    def describe_spot_instance_requests(self, **_: Any) -> dict[str, Any]:
        return {"SpotInstanceRequests": self.spot}


def instance(iid: str, state: str, **more: Any) -> dict[str, Any]:
    return {"InstanceId": iid, "State": {"Name": state}, "PrivateDnsName": f"ip-{iid}.ec2.internal",
            "Tags": [{"Key": "provisioner:cluster", "Value": "prod-a"}], **more}


def test_a_spot_interruption_notice_is_a_reclaim_with_the_time_left():
    now = 1_800_000_000.0
    noticed = datetime.fromtimestamp(now - 30, tz=timezone.utc)
    ec2 = FakeEc2(
        instances=[instance("i-1", "running", SpotInstanceRequestId="sir-1"),
                   instance("i-2", "running", SpotInstanceRequestId="sir-2"),
                   instance("i-3", "terminated", StateReason={"Code": "Server.SpotInstanceTermination",
                                                                "Message": "Server.SpotInstanceTermination: Spot "
                                                                           "instance termination"})],
        spot=[{"SpotInstanceRequestId": "sir-1", "Status": {"Code": "marked-for-termination", "UpdateTime": noticed,
                                                            "Message": "Spot Instance is marked for termination"}},
              {"SpotInstanceRequestId": "sir-2", "Status": {"Code": "fulfilled"}}])
    out = reclaims(SETTINGS, Clients(ec2=ec2, clock=lambda: now),
                   {"machines": [{"name": "h1", "machineId": "i-1"}, {"name": "h2", "machineId": "i-2"},
                                 {"name": "h3", "machineId": "i-3"}]})
    got = {r["machineId"]: r for r in out["requests"]}
    assert sorted(got) == ["i-1", "i-3"]
    assert got["i-1"]["gracePeriod"] == 90 and "marked-for-termination" in got["i-1"]["message"]
    assert got["i-3"]["gracePeriod"] == 0 and "SpotInstanceTermination" in got["i-3"]["message"]


def test_an_id_ec2_does_not_show_is_not_yet_returned_then_gone_after_the_grace():
    ask = Termination("ret-1", 1_800_000_000, ("i-young",))
    soon = Clients(ec2=FakeEc2(), clock=lambda: ask.asked_at + 10)
    later = Clients(ec2=FakeEc2(), clock=lambda: ask.asked_at + CONSISTENCY_GRACE_S + 1)
    early, _ = termination_status(SETTINGS, soon, ask, {})
    assert early["status"] == "running" and early["machines"][0]["result"] == "executing"
    late, _ = termination_status(SETTINGS, later, ask, {})
    assert late["status"] == "complete" and late["machines"][0]["message"] == "no longer known to EC2"


def test_a_return_finishes_terminating_what_ec2_shows_still_running():
    ask = Termination("ret-1", 1_800_000_000, ("i-1", "i-2"))
    seen = {"i-1": instance("i-1", "running"), "i-2": instance("i-2", "shutting-down")}
    answer, still_up = termination_status(SETTINGS, Clients(ec2=FakeEc2(), clock=lambda: ask.asked_at), ask, seen)
    assert still_up == ["i-1"]
    assert answer["status"] == "running"


def test_transient_errors_are_retried_in_place_capacity_errors_are_not():
    ec2 = FakeEc2(fail=[aws_error("RequestLimitExceeded", 503), aws_error("InternalError", 500)])
    clients = Clients(ec2=ec2, sleep=lambda _s: None)
    assert clients.call("describe_instances") == {"Reservations": [{"Instances": []}]}
    assert ec2.calls == ["describe_instances"] * 3
    ec2 = FakeEc2(fail=[aws_error("InsufficientInstanceCapacity", 500)])
    with pytest.raises(ClientError):
        Clients(ec2=ec2, sleep=lambda _s: None).call("describe_instances")
    assert ec2.calls == ["describe_instances"], "capacity is for the next subnet, not for a retry here"


def test_no_retry_that_would_outlive_the_deadline():
    ec2 = FakeEc2(fail=[aws_error("RequestLimitExceeded", 503)] * 3)
    clients = Clients(ec2=ec2, sleep=lambda _s: None, clock=lambda: 1000.0, deadline=1002.1)
    with pytest.raises(ClientError):
        clients.call("describe_instances")
    assert len(ec2.calls) == 1


def test_describe_gives_a_zone_to_a_template_of_one_zone_only():
    from providers.contract import parse_output
    from providers.ec2.describe import describe

    class Subnets:
        def describe_subnets(self, **params: Any) -> dict[str, Any]:
            zones = {"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"}
            return {"Subnets": [{"SubnetId": s, "AvailabilityZone": zones[s]} for s in params["SubnetIds"]]}

    settings = parse_settings(
        "region: us-east-1\ncluster: prod-a\npriority: 7\ncapacity: 40\ntemplates:\n"
        "  - {id: one, instance_type: m6i.large, image_id: ami-1, subnets: [subnet-a], max_number: 5,"
        " price_per_hour: 0.1}\n"
        "  - {id: two, instance_type: m6i.large, image_id: ami-1, subnets: [subnet-a, subnet-b], max_number: 5}\n",
        Path("/nonexistent/ec2.yaml"))
    out = describe(settings, Clients(ec2=Subnets()), {})
    parsed = parse_output("v2", "hosts", "describe", out, provider="aws")
    one, two = parsed.templates
    assert (one.zone, one.cost_per_hour) == ("us-east-1a", 0.1)
    assert (two.zone, two.cost_per_hour) == (None, None)
    assert (parsed.priority, parsed.capacity, parsed.region) == (7, 40, "us-east-1")


def test_describe_says_each_templates_capacity_type_from_its_market():
    from providers.contract import parse_output
    from providers.ec2.describe import describe

    class Subnets:
        def describe_subnets(self, **params: Any) -> dict[str, Any]:
            return {"Subnets": [{"SubnetId": s, "AvailabilityZone": "us-east-1a"} for s in params["SubnetIds"]]}

    settings = parse_settings(
        "region: us-east-1\ncluster: prod-a\ntemplates:\n"
        "  - {id: od, instance_type: m6i.large, image_id: ami-1, subnets: [subnet-a], max_number: 5,"
        " attributes: {ncpus: 2}}\n"
        "  - {id: sp, instance_type: m6i.large, image_id: ami-1, subnets: [subnet-a], max_number: 5, market: spot}\n",
        Path("/nonexistent/ec2.yaml"))
    parsed = parse_output("v2", "hosts", "describe", describe(settings, Clients(ec2=Subnets()), {}), provider="aws")
    assert [(t.id, t.attributes) for t in parsed.templates] == [
        ("od", {"ncpus": 2, "capacity_type": "on-demand"}), ("sp", {"capacity_type": "spot"})]
    assert [parsed.capacity_type(t) for t in ("od", "sp")] == ["on-demand", "spot"]


def test_a_capacity_type_attribute_that_is_not_the_market_is_refused():
    with pytest.raises(ProviderError) as info:
        parse_settings("region: us-east-1\ncluster: prod-a\ntemplates:\n"
                       "  - {id: sp, instance_type: m6i.large, image_id: ami-1, subnets: [subnet-a], max_number: 5,"
                       " attributes: {capacity_type: spot}}\n", Path("/nonexistent/ec2.yaml"))
    assert info.value.code == errors.CONFIG
    assert str(info.value) == ("ec2.yaml: templates[0]: attributes.capacity_type 'spot' is not the template's "
                               "market 'on-demand': describe reports the market (leave capacity_type out)")
