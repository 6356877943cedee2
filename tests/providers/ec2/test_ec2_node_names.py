"""Named hosts without EC2: the name in each host's user data, the names checked, the deadline kept.

The moto runs of named requests are in ``test_ec2_script.py``; these call the
functions in-process where a fake client or clock plays the part better.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from providers.ec2 import errors
from providers.ec2.clients import Clients
from providers.ec2.errors import ProviderError
from providers.ec2.launch import request
from providers.ec2.node_names import user_data
from providers.ec2.settings import USER_DATA_LIMIT
from providers.ec2.settings import parse as parse_settings

WHERE = "templates[0].user_data_file"


@pytest.mark.parametrize("template,name,expected", [
    # A shell script: the name is exported on its second line, the rest as it was.
    (b"#!/bin/bash\nslurmd -b -N \"$PROVISIONER_NODE_NAME\"\n", "cloud1",
     b"#!/bin/bash\nexport PROVISIONER_NODE_NAME=cloud1\nslurmd -b -N \"$PROVISIONER_NODE_NAME\"\n"),
    (b"#!/usr/bin/env -S bash -e\r\nrun\r\n", "cloud2",
     b"#!/usr/bin/env -S bash -e\r\nexport PROVISIONER_NODE_NAME=cloud2\nrun\r\n"),
    (b"#!/bin/sh", "c3", b"#!/bin/sh\nexport PROVISIONER_NODE_NAME=c3\n"),
    # The placeholder, in any format: replaced wherever it is, by nothing for a host made without a name.
    (b"#cloud-config\nhostname: {{PROVISIONER_NODE_NAME}}\nruncmd: [[slurmd, -N, {{PROVISIONER_NODE_NAME}}]]\n",
     "cloud1", b"#cloud-config\nhostname: cloud1\nruncmd: [[slurmd, -N, cloud1]]\n"),
    (b"#!/bin/sh\nNAME={{PROVISIONER_NODE_NAME}}\n", None, b"#!/bin/sh\nNAME=\n"),
    # No user data: the name alone, for the host to read from its metadata.
    (None, "cloud1", b"PROVISIONER_NODE_NAME=cloud1\n"),
    # A host made without a name: the template's user data as it is, or none.
    (b"#!/bin/bash\necho hi\n", None, b"#!/bin/bash\necho hi\n"),
    (b"#cloud-config\n", None, b"#cloud-config\n"),
    (None, None, None),
])
def test_the_name_goes_into_the_user_data_where_its_place_is_certain(template, name, expected):
    assert user_data(template, name, WHERE) == expected


@pytest.mark.parametrize("template", [b"#cloud-config\nruncmd: [join]\n", b"#!/usr/bin/python3\nprint(1)\n",
                                      b"\x1f\x8b\x08gzip"])
def test_user_data_with_no_certain_place_for_a_name_is_refused_for_a_named_host(template):
    with pytest.raises(ProviderError) as refused:
        user_data(template, "cloud1", WHERE)
    assert refused.value.code == errors.CONFIG
    assert refused.value.message.startswith(f"{WHERE}: ") and "{{PROVISIONER_NODE_NAME}}" in refused.value.message


def test_user_data_the_name_makes_too_long_is_refused():
    line = b"export PROVISIONER_NODE_NAME=c1\n"
    template = b"#!/bin/sh\n" + b"#" * (USER_DATA_LIMIT - len(b"#!/bin/sh\n") - len(line) - 1) + b"\n"
    assert len(user_data(template, "c1", WHERE)) == USER_DATA_LIMIT, "up to the limit is taken"
    with pytest.raises(ProviderError) as refused:
        user_data(template, "cloud1", WHERE)
    assert refused.value.code == errors.CONFIG and "16384" in refused.value.message


SETTINGS = parse_settings(
    "region: us-east-1\ncluster: prod-a\ntemplates:\n"
    "  - {id: c6i-4x, instance_type: c6i.4xlarge, image_id: ami-1, subnets: [subnet-a, subnet-b], max_number: 5}\n",
    Path("/nonexistent/ec2.yaml"))


class Launches:
    """An EC2 that shows no instance yet, launches whatever it is asked, and takes ``took`` seconds a launch."""

    def __init__(self, clock: list[float], took: float) -> None:
        self.clock = clock
        self.took = took
        self.launched: list[dict[str, Any]] = []

    def describe_instances(self, **_: Any) -> dict[str, Any]:
        return {"Reservations": []}

    def run_instances(self, **params: Any) -> dict[str, Any]:
        self.clock[0] += self.took
        self.launched.append(params)
        return {"Instances": [{"InstanceId": f"i-{len(self.launched)}"}]}


def test_named_hosts_left_when_the_deadline_is_near_are_answered_not_launched():
    clock = [1000.0]
    ec2 = Launches(clock, took=30.0)
    # Room for one launch and a little: the second would end past the deadline, where the daemon kills the call.
    clients = Clients(ec2=ec2, clock=lambda: clock[0], deadline=1000.0 + 2 + 10 + 25)
    out = request(SETTINGS, clients, {"token": "req-1", "template": "c6i-4x", "count": 3,
                                      "names": ["cloud1", "cloud2", "cloud3"]})
    assert [p["TagSpecifications"][0]["Tags"][0] for p in ec2.launched] == [{"Key": "Name", "Value": "cloud1"}]
    assert out["requestId"] == "run:req-1:1", "the request completes with the one host made"
    assert "cloud2, cloud3 not launched: too near the deadline" in out["message"]


def test_a_named_request_launches_one_instance_per_name_each_with_its_own_client_token():
    clock = [1000.0]
    ec2 = Launches(clock, took=1.0)
    out = request(SETTINGS, Clients(ec2=ec2, clock=lambda: clock[0]),
                  {"token": "req-1", "template": "c6i-4x", "count": 2, "names": ["cloud1", "cloud2"],
                   "tags": {"Name": "the-daemons"}})
    assert out["requestId"] == "run:req-1:2"
    assert [(p["MinCount"], p["MaxCount"]) for p in ec2.launched] == [(1, 1), (1, 1)]
    named = [{t["Key"]: t["Value"] for t in p["TagSpecifications"][0]["Tags"]} for p in ec2.launched]
    assert [(t["Name"], t["provisioner:node"]) for t in named] == [("cloud1", "cloud1"), ("cloud2", "cloud2")], \
        "the node's name wins over a Name among the daemon's tags"
    assert len({p["ClientToken"] for p in ec2.launched}) == 2, "EC2 would answer the second name with the first's"
