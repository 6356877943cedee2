"""``provisioner-ec2`` run as the daemon runs it, against moto's EC2 on loopback.

Every answer after exit 0 is also parsed by the daemon's own v2 parser: an
answer the daemon cannot read is as bad as a wrong one.
"""

from __future__ import annotations

from typing import Any

import pytest

from providers.contract import parse_output
from tests.support.ec2.world import CREDENTIALS, World, wait_for

pytestmark = pytest.mark.slow  # real processes: the provider's script and moto's EC2 server

TEMPLATE = "c6i-4x"
OURS = {"provisioner-provider": "aws"}


def answer(world: World, action: str, doc: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    """The output of a run that must succeed, checked by the daemon's parser."""
    run = world.run(action, doc, token=token)
    assert run.code == 0, f"{action} exited {run.code}: {run.stderr}"
    assert run.out is not None
    parse_output("v2", "hosts", action, run.out, provider="aws")  # type: ignore[arg-type]
    return run.out


def launch(world: World, token: str, count: int = 2) -> str:
    out = answer(world, "request", {"token": token, "template": TEMPLATE, "count": count,
                                    "tags": {**OURS, "provisioner-request": token}}, token=token)
    return out["requestId"]


def status(world: World, request_id: str) -> dict[str, Any]:
    return answer(world, "status", {"requests": [{"requestId": request_id}]})["requests"][0]


def settled(world: World, request_id: str, seen: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The request's status once it is no longer running; every status on the way goes into ``seen``."""
    st = status(world, request_id)
    seen.append(st)
    return st if st["status"] != "running" else None


@pytest.mark.parametrize("lag", [False, True], ids=["moto", "lagging"])
def test_lifecycle_request_running_return_terminated(request, lag):
    world: World = request.getfixturevalue("lagging" if lag else "world")
    described = answer(world, "describe", {})
    assert [t["id"] for t in described["templates"]] == [TEMPLATE]
    assert described["templates"][0]["cost_per_hour"] == 0.68
    assert "zone" not in described["templates"][0], "a template over two zones has no single zone"
    assert described["message"] == f"cluster {world.cluster}: {TEMPLATE} in us-east-1a, us-east-1b"

    rid = launch(world, "req-life")
    seen: list[dict[str, Any]] = []
    if lag:
        settled(world, rid, seen)
        world.proxy.pending_s = 0.0  # EC2 says running at last
    done = wait_for(lambda: settled(world, rid, seen), 20, "the launch to complete")
    assert done["status"] == "complete"
    assert [m["result"] for m in done["machines"]] == ["succeed", "succeed"]
    assert all(m["name"].startswith("ip-10-42-") and m["privateIpAddress"] for m in done["machines"])
    if lag:
        assert seen[0]["status"] == "running" and {m["status"] for m in seen[0]["machines"]} == {"pending"}, \
            "while EC2 says pending, the launch is still running and its machines executing"
    listed = answer(world, "list", {"tags": OURS})["machines"]
    assert sorted(m["machineId"] for m in listed) == sorted(m["machineId"] for m in done["machines"])
    assert {m["templateId"] for m in listed} == {TEMPLATE}

    machines = [{"name": m["name"], "machineId": m["machineId"]} for m in done["machines"]]
    ret = answer(world, "return", {"token": "ret-life", "machines": machines}, token="ret-life")["requestId"]
    seen = []
    if lag:
        settled(world, ret, seen)
        world.proxy.shutting_down_s = 0.0  # EC2 says terminated at last
    done = wait_for(lambda: settled(world, ret, seen), 20, "the return to complete")
    assert done["status"] == "complete"
    assert {m["status"] for m in done["machines"]} == {"terminated"}
    if lag:
        assert seen[0]["status"] == "running" and {m["result"] for m in seen[0]["machines"]} == {"executing"}, \
            "shutting-down is not returned yet: it may still cost"
    assert {i["State"]["Name"] for i in world.instances()} == {"terminated"}
    assert answer(world, "list", {"tags": OURS})["machines"] == []


def test_a_repeated_token_launches_nothing_even_in_another_zone(world):
    # The first call meets no capacity in the first zone and launches in the second; the repeat
    # finds the first zone free again. moto ignores ClientToken: only the tag look-up stands between
    # the repeat and a second set of instances.
    world.proxy.fail("RunInstances", "InsufficientInstanceCapacity", 500, when={"SubnetId": world.moto.subnets[0]},
                     times=1)
    first = launch(world, "req-twice", count=3)
    assert len(world.instances()) == 3
    again = launch(world, "req-twice", count=3)
    assert again == first
    assert len(world.instances()) == 3, "a repeated token launched again"
    assert len(world.proxy.actions("RunInstances")) == 2, "the repeat made no RunInstances call at all"


def test_a_capacity_error_in_the_first_subnet_moves_to_the_second(world):
    first, second = world.moto.subnets
    world.proxy.fail("RunInstances", "InsufficientInstanceCapacity", 500, when={"SubnetId": first})
    launch(world, "req-cap", count=2)
    tried = [c["SubnetId"] for c in world.proxy.actions("RunInstances")]
    assert tried == [first, second]
    assert {i["SubnetId"] for i in world.instances()} == {second}
    assert {i["Placement"]["AvailabilityZone"] for i in world.instances()} == {world.moto.zones[1]}
    tokens = {c["ClientToken"] for c in world.proxy.actions("RunInstances")}
    assert len(tokens) == 2, "EC2 dedupes a client token per zone only: each subnet gets its own"


def test_no_capacity_in_any_subnet_exits_69(world):
    world.proxy.fail("RunInstances", "InsufficientInstanceCapacity", 500)
    run = world.run("request", {"token": "req-none", "template": TEMPLATE, "count": 1}, token="req-none")
    assert run.code == 69
    assert all(s in run.stderr for s in world.moto.subnets)
    assert world.instances() == []


def test_a_spot_capacity_error_also_moves_on(world):
    doc = world.settings()
    doc["templates"][0]["market"] = "spot"
    world.write_settings(doc)
    world.proxy.fail("RunInstances", "InsufficientInstanceCapacity", 500, when={"SubnetId": world.moto.subnets[0]},
                     message="There is no Spot capacity available that matches your request.")
    launch(world, "req-spot", count=1)
    call = world.proxy.actions("RunInstances")[-1]
    assert call["InstanceMarketOptions.MarketType"] == "spot"
    assert [(i["InstanceLifecycle"], i["SubnetId"]) for i in world.instances()] == [("spot", world.moto.subnets[1])]


def test_throttling_is_retried_and_then_exits_75(world):
    world.proxy.fail("DescribeInstances", "RequestLimitExceeded", 503, times=1)
    rid = launch(world, "req-throttle", count=1)
    assert len(world.proxy.actions("DescribeInstances")) == 2, "one throttled look-up, then the same again"
    world.proxy.fail("DescribeInstances", "RequestLimitExceeded", 503)
    run = world.run("status", {"requests": [{"requestId": rid}]})
    assert run.code == 75
    assert "RequestLimitExceeded" in run.stderr


@pytest.mark.parametrize("code,status,exit", [("UnauthorizedOperation", 403, 77), ("InvalidParameterValue", 400, 78)])
def test_aws_errors_map_to_exit_codes_without_secrets(world, code, status, exit):
    secret = CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
    world.proxy.fail("RunInstances", code, status,
                     message=f"signed with {secret} by {CREDENTIALS['AWS_ACCESS_KEY_ID']}")
    run = world.run("request", {"token": "req-err", "template": TEMPLATE, "count": 1}, token="req-err")
    assert run.code == exit
    assert code in run.stderr
    assert secret not in run.stderr + run.stdout
    assert CREDENTIALS["AWS_ACCESS_KEY_ID"] in run.stderr, "a key's id is no secret: it says which key was refused"


def test_an_instance_terminated_behind_our_back_shows_in_reclaims(world):
    rid = launch(world, "req-reclaim", count=3)
    machines = status(world, rid)["machines"]
    assert [m["status"] for m in machines] == ["running"] * 3
    gone, returned, kept = machines
    world.moto.ec2().terminate_instances(InstanceIds=[gone["machineId"]])
    first = answer(world, "return", {"token": "ret-reclaim", "machines": [returned]}, token="ret-reclaim")
    again = answer(world, "return", {"token": "ret-reclaim", "machines": [returned]}, token="ret-reclaim")
    assert first["message"] == "terminating 1" and again["message"] == "terminating 0; 1 already ending", \
        "a repeated return token is the same call: nothing more is ended"
    # The daemon asks about the hosts it held before the return: the one we ended ourselves is no reclaim.
    held = [{"name": m["name"], "machineId": m["machineId"]} for m in machines]
    out = answer(world, "reclaims", {"machines": held})
    assert [(r["machine"], r["machineId"]) for r in out["requests"]] == [(gone["name"], gone["machineId"])]
    assert "terminated" in out["requests"][0]["message"] and "User initiated" in out["requests"][0]["message"]


def test_list_finds_ours_only(world):
    launch(world, "req-list", count=1)
    ec2 = world.moto.ec2()
    subnet = world.moto.subnets[0]

    def made_by_hand(**tags: str) -> str:
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        return ec2.run_instances(ImageId="ami-0123456789abcdef0", InstanceType="t3.micro", MinCount=1, MaxCount=1,
                                 SubnetId=subnet, TagSpecifications=spec)["Instances"][0]["InstanceId"]

    orphan = made_by_hand(**{"provisioner:cluster": world.cluster, "provisioner-provider": "aws"})
    made_by_hand(**{"provisioner:cluster": "another-cluster", "provisioner-provider": "aws"})
    made_by_hand(**{"provisioner:cluster": world.cluster, "provisioner-provider": "another-provider"})
    ours = {i["InstanceId"] for i in world.instances(**{"provisioner:token": "req-list"})}
    listed = {m["machineId"] for m in answer(world, "list", {"tags": OURS})["machines"]}
    assert listed == ours | {orphan}


def test_a_return_right_after_launch_waits_for_ec2_to_show_the_instance(world):
    """EC2 may not know an instance id for a moment after launching it; that is not "gone"."""
    launch(world, "req-young", count=1)
    young = world.instances()[0]["InstanceId"]
    world.proxy.hide(young)
    ret = answer(world, "return", {"token": "ret-young", "machines": [{"name": "", "machineId": young}]},
                 token="ret-young")
    assert "not visible" in ret["message"]
    assert [i["State"]["Name"] for i in world.instances()] == ["running"], "nothing terminated yet"
    first = status(world, ret["requestId"])
    assert first["status"] == "running" and first["machines"][0]["result"] == "executing", \
        "an id EC2 does not show just after the return was asked is not returned"
    world.proxy.show(young)
    st = status(world, ret["requestId"])
    assert st["status"] == "running", "EC2 showed it running: status terminated it, and follows it"
    assert [i["State"]["Name"] for i in world.instances()] == ["terminated"]
    assert status(world, ret["requestId"])["status"] == "complete"
    tags = {t["Key"]: t["Value"] for t in world.instances()[0]["Tags"]}
    assert tags["provisioner:return"] == "ret-young"


def test_a_return_never_terminates_an_instance_of_another_cluster(world):
    foreign = world.moto.ec2().run_instances(
        ImageId="ami-0123456789abcdef0", InstanceType="t3.micro", MinCount=1, MaxCount=1,
        SubnetId=world.moto.subnets[0])["Instances"][0]["InstanceId"]
    ret = answer(world, "return", {"token": "ret-foreign", "machines": [{"name": "x", "machineId": foreign}]},
                 token="ret-foreign")
    st = status(world, ret["requestId"])
    assert st["status"] == "complete_with_error" and st["machines"][0]["result"] == "fail"
    state = world.moto.ec2().describe_instances(InstanceIds=[foreign])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] == "running"


@pytest.mark.parametrize("change,key", [
    (lambda d: d["templates"][0].update(subnets=["subnet-aaa", "sn-b"]), "templates[0].subnets[1]"),
    (lambda d: d["templates"][0].update(market="reserved"), "templates[0].market"),
    (lambda d: d["templates"][0].update(instance_typ="c6i.large"), "templates[0].instance_typ"),
    (lambda d: d.pop("cluster"), "cluster"),
])
def test_bad_settings_exit_78_naming_the_key(world, change, key):
    doc = world.settings()
    change(doc)
    world.write_settings(doc)
    run = world.run("describe", {})
    assert run.code == 78
    assert f": {key}: " in run.stderr
    assert world.proxy.calls == [], "a bad settings file is found before any AWS call"


def test_a_subnet_unknown_to_ec2_is_a_configuration_error_naming_it(world):
    doc = world.settings()
    doc["templates"][0]["subnets"] = [world.moto.subnets[0], "subnet-0badbadbadbadbad0"]
    world.write_settings(doc)
    run = world.run("describe", {})
    assert run.code == 78
    assert "templates[0].subnets[1]: subnet-0badbadbadbadbad0 does not exist" in run.stderr


def test_settings_file_unset_or_unreadable_exits_78(world):
    world.settings_path.unlink()
    run = world.run("describe", {})
    assert run.code == 78 and "cannot read the settings file" in run.stderr


# --- named hosts (Slurm's power saving names the nodes it wants) ------------------------------------------------


JOIN = "#!/bin/bash\nslurmd -b -N \"$PROVISIONER_NODE_NAME\"\n"


def launch_named(world: World, token: str, names: list[str]) -> dict[str, Any]:
    return answer(world, "request", {"token": token, "template": TEMPLATE, "count": len(names), "names": names,
                                     "tags": {**OURS, "provisioner-request": token}}, token=token)


def with_join_script(world: World) -> None:
    (world.folder / "join.sh").write_text(JOIN)
    doc = world.settings()
    doc["templates"][0]["user_data_file"] = "join.sh"
    world.write_settings(doc)


def by_name(world: World) -> dict[str, str]:
    """EC2's Name tag -> instance id, of every instance of the test's cluster."""
    return {t["Value"]: i["InstanceId"] for i in world.instances() for t in i["Tags"] if t["Key"] == "Name"}


def user_data_of(world: World, instance_id: str) -> str:
    import base64

    got = world.moto.ec2().describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    return base64.b64decode(got["UserData"]["Value"]).decode()


def test_each_named_host_carries_its_name_as_its_name_tag_and_in_its_user_data(world):
    with_join_script(world)
    out = launch_named(world, "req-named", ["cloud1", "cloud2"])
    assert out["requestId"] == "run:req-named:2"
    named = by_name(world)
    assert sorted(named) == ["cloud1", "cloud2"] and len(world.instances()) == 2
    for name, iid in named.items():
        assert user_data_of(world, iid) == f"#!/bin/bash\nexport PROVISIONER_NODE_NAME={name}\n" + JOIN[12:], \
            "the host's user data says its name before the template's script runs"
    calls = world.proxy.actions("RunInstances")
    assert [(c["MinCount"], c["MaxCount"]) for c in calls] == [("1", "1"), ("1", "1")], "one launch per name"
    assert len({c["ClientToken"] for c in calls}) == 2, "a name sharing a client token would get another's host"


def test_a_repeated_named_request_makes_nothing_new_and_each_name_stays_on_its_host(world):
    first = launch_named(world, "req-again", ["cloud1", "cloud2", "cloud3"])
    named = by_name(world)
    again = launch_named(world, "req-again", ["cloud1", "cloud2", "cloud3"])
    assert again["requestId"] == first["requestId"] == "run:req-again:3"
    assert "none launched now" in again["message"]
    assert len(world.proxy.actions("RunInstances")) == 3, "the repeat made no RunInstances call"
    assert by_name(world) == named and len(world.instances()) == 3


def test_a_named_request_cut_short_by_capacity_is_finished_by_its_repeat(world):
    # cloud2 finds no room in any subnet: cloud1 is made, cloud2 answered as not launched (the daemon orders it
    # again). A repeat of the token (the answer was lost) makes cloud2 only.
    world.proxy.fail("RunInstances", "InsufficientInstanceCapacity", 500,
                     when={"TagSpecification.1.Tag.1.Value": "cloud2"}, times=2)
    first = launch_named(world, "req-short", ["cloud1", "cloud2"])
    assert first["requestId"] == "run:req-short:1", "the request completes with the host made"
    assert "cloud2 not launched" in first["message"] and "InsufficientInstanceCapacity" in first["message"]
    assert sorted(by_name(world)) == ["cloud1"]
    cloud1 = by_name(world)["cloud1"]
    tried = {c["SubnetId"]: c["ClientToken"] for c in world.proxy.actions("RunInstances")
             if c["TagSpecification.1.Tag.1.Value"] == "cloud2"}
    again = launch_named(world, "req-short", ["cloud1", "cloud2"])
    assert again["requestId"] == "run:req-short:2"
    assert sorted(by_name(world)) == ["cloud1", "cloud2"] and by_name(world)["cloud1"] == cloud1
    last = world.proxy.actions("RunInstances")[-1]
    assert last["TagSpecification.1.Tag.1.Value"] == "cloud2"
    assert last["ClientToken"] == tried[last["SubnetId"]], "a name's repeat in a subnet is the same call to EC2"


def test_status_list_and_return_know_a_named_host_by_its_name(world):
    rid = launch_named(world, "req-status", ["cloud1", "cloud2"])["requestId"]
    named = by_name(world)
    machines = status(world, rid)["machines"]
    assert {m["machineId"]: m["name"] for m in machines} == {iid: name for name, iid in named.items()}
    assert all(m["privateIpAddress"].startswith("10.42.") for m in machines), "the address the bridge binds"
    listed = answer(world, "list", {"tags": OURS})["machines"]
    assert {m["machineId"]: m["name"] for m in listed} == {iid: name for name, iid in named.items()}
    ret = answer(world, "return", {"token": "ret-named", "machines": [{"name": "cloud2"}]}, token="ret-named")
    assert ret["requestId"].endswith(f":{named['cloud2']}"), "a machine given by name only is found by it"
    assert {i["InstanceId"]: i["State"]["Name"] for i in world.instances()} == \
        {named["cloud1"]: "running", named["cloud2"]: "terminated"}


@pytest.mark.parametrize("names,said", [
    (["cloud1"], "names: 1 name for count 2"),
    (["cloud1", "cloud1"], "names: 'cloud1' is named twice"),
    (["cloud1", "x;reboot"], "names[1]: String should match pattern"),
])
def test_a_bad_names_list_is_refused_before_any_aws_call(world, names, said):
    run = world.run("request", {"token": "req-bad", "template": TEMPLATE, "count": 2, "names": names},
                    token="req-bad")
    assert run.code == 65
    assert said in run.stderr
    assert world.proxy.calls == [] and world.instances() == []


def test_user_data_that_cannot_take_every_name_launches_none_of_them(world):
    # The name goes where the placeholder is; with the second, longer name the user data passes EC2's limit.
    head = "#cloud-config\nhostname: {{PROVISIONER_NODE_NAME}}\n#"
    (world.folder / "cloud.yaml").write_text(head + "x" * (16 * 1024 - 2 - len(head) - 1) + "\n")  # 2 bytes short
    doc = world.settings()
    doc["templates"][0]["user_data_file"] = "cloud.yaml"
    world.write_settings(doc)
    run = world.run("request", {"token": "req-long", "template": TEMPLATE, "count": 2,
                                "names": ["c1", "cloud-node-with-a-longer-name"]}, token="req-long")
    assert run.code == 78
    assert "templates[0].user_data_file: with the name 'cloud-node-with-a-longer-name'" in run.stderr
    assert world.proxy.actions("RunInstances") == [] and world.instances() == []
