"""Both script styles: input documents, command lines, and raw output to normalized models."""

from __future__ import annotations

import copy
import re

import pytest

from messages.description import Pool
from messages.scripts import Accepted, HeldGrant, Machine, Reclaim, Usage
from providers.contract import ContractError, build_argv, build_input, decode_stdout, parse_output, supports

# --- supports ------------------------------------------------------------------


def test_lsf_has_five_actions_and_v2_seven():
    lsf = {a for a in ("describe", "request", "status", "return", "list", "reclaims", "usage") if supports("lsf", a)}
    v2 = {a for a in ("describe", "request", "status", "return", "list", "reclaims", "usage") if supports("v2", a)}
    assert lsf == {"describe", "request", "status", "return", "reclaims"}
    assert v2 == {"describe", "request", "status", "return", "list", "reclaims", "usage"}


# --- input ---------------------------------------------------------------------


def test_v2_inputs_carry_the_token_on_mutating_actions():
    assert build_input("v2", "hosts", "describe", {}, None) == {}
    assert build_input("v2", "hosts", "request", {"template": "T", "count": 3, "tags": {"team": "hpc"}}, "tok") == {
        "token": "tok",
        "template": "T",
        "count": 3,
        "tags": {"team": "hpc"},
    }
    assert build_input("v2", "units", "request", {"resource": "vcs", "count": 5}, "tok") == {
        "token": "tok",
        "resource": "vcs",
        "count": 5,
        "tags": {},
    }
    assert build_input("v2", "hosts", "return", {"machines": [{"name": "h1", "machineId": "i-1"}]}, "tok") == {
        "token": "tok",
        "machines": [{"name": "h1", "machineId": "i-1"}],
    }
    assert build_input("v2", "units", "return", {"resource": "vcs", "count": 2, "grants": ["g1"]}, "tok") == {
        "token": "tok",
        "resource": "vcs",
        "count": 2,
        "grants": ["g1"],
    }
    assert build_input("v2", "hosts", "status", {"requests": [{"requestId": "r1"}]}, None) == {
        "requests": [{"requestId": "r1"}]
    }
    assert build_input("v2", "hosts", "list", {"tags": {"owner": "x"}}, None) == {"tags": {"owner": "x"}}
    assert build_input("v2", "units", "usage", {"resource": "vcs"}, None) == {"resource": "vcs"}


def test_lsf_inputs_keep_the_lsf_shapes(tools):
    request = build_input("lsf", "hosts", "request", {"template": "Template-VM-1", "count": 2}, "tok-7")
    expected = tools.data("requestMachines.input.json")
    expected["userData"] = {"provisioner_token": "tok-7"}
    assert request == expected
    machines = tools.data("requestReturnMachines.input.json")
    assert build_input("lsf", "hosts", "return", machines, "tok-8") == machines
    assert build_input("lsf", "hosts", "status", tools.data("getRequestStatus.input.json"), None) == tools.data(
        "getRequestStatus.input.json"
    )
    reclaims = tools.data("getReturnRequests.input.json")
    assert build_input("lsf", "hosts", "reclaims", reclaims, None) == reclaims
    assert build_input("lsf", "hosts", "describe", {}, None) == tools.data("getAvailableTemplates.input.json")


def test_a_request_for_named_nodes_passes_the_names_to_a_v2_script_and_none_to_an_lsf_plugin():
    doc = {"template": "T", "count": 2, "names": ["cloud1", "cloud2"]}
    assert build_input("v2", "hosts", "request", doc, "tok")["names"] == ["cloud1", "cloud2"]
    assert "names" not in str(build_input("lsf", "hosts", "request", doc, "tok"))


@pytest.mark.parametrize(
    ("style", "kind", "action", "document", "token", "message"),
    [
        ("v2", "hosts", "request", {"template": "T", "count": 1}, None, "request needs an idempotency token"),
        ("v2", "hosts", "return", {"token": "a", "machines": [{"name": "h"}]}, "b", "the document's token differs"),
        ("v2", "hosts", "request", {"template": "T", "resource": "r", "count": 1}, "t", "exactly one of template"),
        ("v2", "hosts", "request", {"template": "T", "count": 0}, "t", "input count: Input should be greater than"),
        ("v2", "units", "request", {"template": "T", "count": 1}, "t", "does not fit a units provider"),
        ("v2", "hosts", "return", {"resource": "vcs", "count": 1}, "t", "does not fit a hosts provider"),
        ("v2", "hosts", "return", {"machines": [{}]}, "t", "a machine needs a name or a machineId"),
        ("v2", "hosts", "status", {"requests": []}, None, "input requests: List should have at least 1 item"),
        ("v2", "hosts", "describe", {"extra": 1}, None, "input extra: Extra inputs are not permitted"),
        ("v2", "hosts", "request", {"template": "T", "count": 2, "names": ["a"]}, "t", "names: one per host"),
        ("lsf", "hosts", "list", {}, None, "the lsf style has no list action"),
        ("lsf", "units", "status", {"requests": [{"requestId": "r"}]}, None, "the lsf style serves hosts only"),
    ],
)
def test_bad_inputs_are_the_daemons_error(style, kind, action, document, token, message):
    with pytest.raises(ContractError, match=message) as caught:
        build_input(style, kind, action, document, token)
    assert caught.value.outcome == "spawn_error"


# --- argv ----------------------------------------------------------------------


def test_v2_argv(script, tools, tmp_path):
    path = script("#!/bin/sh\n")
    assert build_argv(tools.provider(path), "status", tmp_path / "in.json") == [
        str(path),
        "status",
        "-f",
        str(tmp_path / "in.json"),
    ]


def test_lsf_argv_prefers_sh_then_bare_then_runs_plain_sh_files_with_sh(script, tools, tmp_path):
    sh = script("#!/bin/sh\n", name="getRequestStatus.sh")
    script("#!/bin/sh\n", name="getRequestStatus")
    bare = script("#!/bin/sh\n", name="requestMachines")
    plain = script("echo\n", name="getReturnRequests.sh", mode=0o644)
    cfg = tools.provider(sh.parent, style="lsf")
    inp = tmp_path / "in.json"
    assert build_argv(cfg, "status", inp) == [str(sh), "-f", str(inp)]
    assert build_argv(cfg, "request", inp) == [str(bare), "-f", str(inp)]
    assert build_argv(cfg, "reclaims", inp) == ["/bin/sh", str(plain), "-f", str(inp)]
    with pytest.raises(ContractError, match="script not found: .*getAvailableTemplates.sh or .*getAvailableTemplates$"):
        build_argv(cfg, "describe", inp)


# --- stdout --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "doc"),
    [
        (b'  \n{"a": 1}\n\n', {"a": 1}),
        (b'INFO starting\n{"a": 1}\n', {"a": 1}),
        (b'log {\n{\n  "a": {\n    "b": [1]\n  }\n}\n', {"a": {"b": [1]}}),
        (b'{"early": true}\nnoise\n{"a": 2}', {"a": 2}),
    ],
)
def test_decode_stdout_accepts_json_and_json_after_log_lines(raw, doc):
    assert decode_stdout(raw) == doc


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "stdout is empty"),
        (b"  \n", "stdout is empty"),
        (b"[1, 2]", "stdout is JSON but not an object \\(got list\\)"),
        (b"log\n{broken", "stdout is not JSON"),
        (b'{"a": "\xc3"}', "stdout is not UTF-8 \\(byte 0xc3 at offset 7\\)"),
        (b'{"a": 1}\ntrailing words', "stdout is not JSON"),
    ],
)
def test_decode_stdout_rejects_what_is_not_one_object(raw, message):
    with pytest.raises(ContractError, match=message) as caught:
        decode_stdout(raw)
    assert caught.value.outcome == "bad_output"


def test_decode_stdout_gives_up_after_a_few_candidate_lines():
    raw = b'{"a": 1}\n' + b"{ not json\n" * 20 + b"tail"
    with pytest.raises(ContractError, match="stdout is not JSON"):
        decode_stdout(raw)


# --- LSF outputs -----------------------------------------------------------------


def test_lsf_templates_become_typed_templates(tools):
    desc = parse_output("lsf", "hosts", "describe", tools.data("getAvailableTemplates.output.json"), provider="aws")
    assert (desc.name, desc.kind) == ("aws", "hosts")
    [t] = desc.templates
    assert (t.id, t.max_number, t.priority, t.zone) == ("Template-VM-1", 10, 10, "us-east-1a")
    assert t.attributes == {
        "type": "X86_64",
        "ncpus": 1.0,
        "ncores": 2.0,
        "nram": 4096.0,
        "mem": 4096.0,
        "zone": "us-east-1a",
        "awshost": True,
    }


def test_symphony_templates_with_extra_keys_and_string_numbers(tools):
    raw = tools.data("getAvailableTemplates.output.symphony-aws.json")
    raw["templates"][0]["maxNumber"] = "10"
    raw["templates"][0]["attributes"]["spot"] = ["Boolean", "0"]
    desc = parse_output("lsf", "hosts", "describe", raw, provider="sym")
    [t] = desc.templates
    assert (t.id, t.max_number, t.priority, t.zone) == ("Spot-Template-VM", 10, None, None)
    assert t.attributes == {"nram": 1024.0, "ncpus": 1.0, "ncores": 1.0, "type": "X86_64", "spot": False}


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        (["Numeric", "lots"], "templates[0].attributes.ncpus: Numeric attribute has a non-numeric value"),
        (["Boolean", "maybe"], "templates[0].attributes.ncpus: Boolean attribute has value 'maybe'"),
        (["Float", "1"], "templates[0].attributes.ncpus: unknown attribute type 'Float'"),
        (["Numeric"], "templates[0].attributes.ncpus: expected"),
    ],
)
def test_bad_lsf_attribute_names_its_place(tools, attr, message):
    raw = tools.data("getAvailableTemplates.output.json")
    raw["templates"][0]["attributes"]["ncpus"] = attr
    with pytest.raises(ContractError) as caught:
        parse_output("lsf", "hosts", "describe", raw, provider="aws")
    assert str(caught.value).startswith(message)


def test_lsf_request_and_return_answers(tools):
    accepted = parse_output("lsf", "hosts", "request", tools.data("requestMachines.output.json"), provider="p")
    assert accepted == Accepted(
        provider_request_id="req-3f1c2a9e-5b7d-4c11-9e0a-0d5b7f2c8a41", message="Request VM from cloud successful."
    )
    returned = parse_output("lsf", "hosts", "return", tools.data("requestReturnMachines.output.json"), provider="p")
    assert returned.provider_request_id == "ret-7c0d9b1e-2f43-4a8e-b6c5-91e3d0f4a2b7"


def test_null_request_id_is_a_failure_with_the_scripts_message(tools):
    with pytest.raises(ContractError) as caught:
        parse_output("lsf", "hosts", "request", tools.data("requestMachines.output.failure.json"), provider="p")
    assert caught.value.outcome == "failed"
    assert str(caught.value) == (
        "exit 0 without a requestId: Failed to create instances. InsufficientInstanceCapacity."
        " Error Code: InsufficientInstanceCapacity"
    )


def test_lsf_status_maps_machines(tools):
    report = parse_output("lsf", "hosts", "status", tools.data("getRequestStatus.output.json"), provider="p")
    [req] = report.requests
    assert (req.request_id, req.status, req.granted) == (
        "req-3f1c2a9e-5b7d-4c11-9e0a-0d5b7f2c8a41",
        "complete_with_error",
        None,
    )
    assert req.machines == [
        Machine(
            machine_id="i-0a1b2c3d4e5f60718",
            name="ip-10-0-1-21.ec2.internal",
            result="succeed",
            status="running",
            private_ip="10.0.1.21",
            public_ip=None,
            launched_at=1734619942.0,
        ),
        Machine(
            machine_id="i-0a1b2c3d4e5f60719",
            name="ip-10-0-1-22.ec2.internal",
            result="fail",
            status="terminated",
            private_ip="10.0.1.22",
            launched_at=1734619942.0,
            message="Instance creation failed: terminated",
        ),
    ]


def test_lsf_status_quirks(tools):
    raw = tools.data("getRequestStatus.output.json")
    first, second = raw["requests"][0]["machines"]
    first["launchTime"] = first.pop("launchtime")
    second["launchtime"] = ""
    second["machineId"] = 12345
    second["result"] = "FAIL"
    second["surprise"] = {"nested": True}
    raw["requests"].append({"requestId": "req-2", "status": "running", "message": "", "machines": None})
    raw["requests"].append({"requestId": "req-3", "status": "Complete"})
    report = parse_output("lsf", "hosts", "status", raw, provider="p")
    machines = report.requests[0].machines
    assert machines[0].launched_at == 1734619942.0
    assert (machines[1].launched_at, machines[1].machine_id, machines[1].result) == (None, "12345", "fail")
    assert [(r.request_id, r.status, r.machines) for r in report.requests[1:]] == [
        ("req-2", "running", []),
        ("req-3", "complete", []),
    ]


def test_a_listed_machines_nulls_numbers_and_empty_strings_become_the_strict_shape():
    raw = {"machines": [
        {"machineId": "i-1", "name": None, "status": None, "message": 3.5, "privateIpAddress": "",
         "publicIpAddress": None, "templateId": 7, "result": " Succeed ", "launchTime": "1700000000"},
        {"machineId": 42},
    ]}
    first, second = parse_output("v2", "hosts", "list", raw, provider="p").machines
    assert (first.name, first.status, first.message, first.private_ip, first.public_ip, first.template,
            first.result, first.launched_at) == ("", "", "3.5", None, None, "7", "succeed", 1700000000.0)
    assert (second.machine_id, second.name, second.result, second.template) == ("42", "", "executing", None)
    # Made without a second validation: each is what validating its own fields gives.
    for m in (first, second):
        assert Machine.model_validate(m.model_dump()) == m


@pytest.mark.parametrize(("machine", "message"), [
    ({"machineId": None}, "machines[0].machineId: Input should be a valid string"),
    ({"machineId": ""}, "machines[0].machineId: String should have at least 1 character"),
    ({"machineId": "i-1", "name": True}, "machines[0].name: Input should be a valid string"),
    ({"machineId": "i-1", "privateIpAddress": ["10.0.0.1"]}, "machines[0].privateIpAddress: Input should be"),
])
def test_a_listed_machine_of_the_wrong_shape_names_its_field(machine, message):
    with pytest.raises(ContractError, match=re.escape(message)):
        parse_output("v2", "hosts", "list", {"machines": [machine]}, provider="p")


def test_status_of_a_return_request(tools):
    raw = tools.data("getRequestStatus.output.return-request.json")
    report = parse_output("lsf", "hosts", "status", raw, provider="p")
    [req] = report.requests
    assert (req.status, req.machines[0].status, req.machines[0].public_ip) == ("complete", "terminated", None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["requests"][0].update(status="failed"), "requests[0].status: Input should be 'running'"),
        (lambda d: d["requests"][0]["machines"][1].pop("machineId"), "requests[0].machines[1].machineId: Field"),
        (lambda d: d["requests"][0]["machines"][0].update(launchtime="soon"), "requests[0].machines[0].launchtime:"),
        (lambda d: d.pop("requests"), "requests: Field required"),
    ],
)
def test_bad_status_names_the_field(tools, change, message):
    raw = copy.deepcopy(tools.data("getRequestStatus.output.json"))
    change(raw)
    with pytest.raises(ContractError) as caught:
        parse_output("lsf", "hosts", "status", raw, provider="p")
    assert str(caught.value).startswith(message)
    assert caught.value.outcome == "bad_output"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("getReturnRequests.output.json", [Reclaim(name="ip-10-0-1-30.ec2.internal", grace_period=0)]),
        (
            "getReturnRequests.output.lsf-awsv2.json",
            [Reclaim(name="ip-10-0-1-30.ec2.internal", machine_id="i-0a1b2c3d4e5f60720")],
        ),
        ("getReturnRequests.output.empty.json", []),
    ],
)
def test_both_reclaim_shapes(tools, name, expected):
    assert parse_output("lsf", "hosts", "reclaims", tools.data(name), provider="p").machines == expected


def test_reclaim_naming_no_machine_is_rejected():
    with pytest.raises(ContractError, match=r"requests\[0\]: names no machine"):
        parse_output("lsf", "hosts", "reclaims", {"requests": [{"gracePeriod": 30}]}, provider="p")


def test_reclaim_grace_period_as_a_string():
    got = parse_output("v2", "hosts", "reclaims", {"requests": [{"machine": "h", "gracePeriod": "120"}]}, provider="p")
    assert got.machines == [Reclaim(name="h", grace_period=120.0)]


# --- v2 outputs ------------------------------------------------------------------


def test_v2_units_description():
    raw = {
        "kind": "units",
        "priority": 5,
        "cost_per_hour": 1.5,
        "lead_time_s": 10,
        "min_request": 2,
        "step": 2,
        "min_hold_s": 3600,
        "capacity": 40,
        "region": "eu",
        "attributes": {"vendor": "synopsys", "floating": ["Boolean", "1"]},
        "pools": [{"resource": "vcs", "capacity": 40, "cost_per_unit_hour": 2.0}],
        "message": "ok",
    }
    desc = parse_output("v2", "units", "describe", raw, provider="lic")
    assert (desc.name, desc.kind, desc.priority, desc.capacity, desc.min_hold_s, desc.step) == (
        "lic",
        "units",
        5,
        40,
        3600.0,
        2,
    )
    assert desc.attributes == {"vendor": "synopsys", "floating": True}
    assert desc.pools == [Pool(resource="vcs", capacity=40, cost_per_unit_hour=2.0)]


def test_v2_description_accepts_both_template_shapes(tools):
    lsf_shaped = tools.data("getAvailableTemplates.output.json")["templates"][0]
    raw = {
        "templates": [
            lsf_shaped,
            {
                "id": "big",
                "max_number": 4,
                "attributes": {"ncpus": ["Numeric", "64"], "type": "X86_64"},
                "cost_per_hour": 3.2,
            },
        ]
    }
    desc = parse_output("v2", "hosts", "describe", raw, provider="p")
    assert [t.id for t in desc.templates] == ["Template-VM-1", "big"]
    assert desc.templates[0].attributes["mem"] == 4096.0
    assert desc.templates[1].attributes == {"ncpus": 64.0, "type": "X86_64"}
    assert desc.templates[1].cost_per_hour == 3.2


def test_v2_description_carries_its_quota_and_an_lsf_templates_ncpus_is_its_vcpus(tools):
    lsf_shaped = tools.data("getAvailableTemplates.output.json")["templates"][0]
    raw = {"quota": {"vcpus": 12},
           "templates": [lsf_shaped, {"id": "big", "max_number": 4, "vcpus": 64, "quota": {"vcpus": 128}}]}
    desc = parse_output("v2", "hosts", "describe", raw, provider="p")
    assert desc.quota is not None and desc.quota.vcpus == 12
    assert [(t.vcpus, t.quota.vcpus if t.quota else None) for t in desc.templates] == [(1, None), (64, 128)]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"prority": 3}, "prority: Extra inputs are not permitted"),
        ({"kind": "units"}, "kind: the provider is configured as hosts but describes itself as 'units'"),
        ({"templates": [{"id": "t", "max_number": -1}]}, "templates[0].max_number: Input should be greater than or"),
        ({"templates": [{"templateId": "t"}]}, "templates[0].maxNumber: Field required"),
        (
            {"templates": [{"id": "t", "max_number": 1, "attributes": {"mem": ["Numeric", "x"]}}]},
            "templates[0].attributes.mem: Numeric attribute has a non-numeric value 'x'",
        ),
        ({"quota": {"vcpus": -1}}, "quota.vcpus: Input should be greater than or equal to 0"),
        ({"quota": {"cpus": 4}}, "quota.vcpus: Field required"),
        (
            {"quota": {"vcpus": 4}, "templates": [{"id": "t", "max_number": 1}]},
            "document: templates[0] (t): vcpus is needed under the provider's quota",
        ),
    ],
)
def test_v2_description_errors_name_the_field(raw, message):
    with pytest.raises(ContractError) as caught:
        parse_output("v2", "hosts", "describe", raw, provider="p")
    assert str(caught.value).startswith(message)


def test_v2_units_status_carries_granted():
    raw = {"requests": [{"requestId": "g-1", "status": "complete", "granted": "5"}]}
    [req] = parse_output("v2", "units", "status", raw, provider="p").requests
    assert (req.request_id, req.granted, req.machines) == ("g-1", 5, [])


def test_v2_list_answer():
    raw = {
        "machines": [{"machineId": "i-9", "name": "h9", "status": "running", "templateId": "T", "launchTime": "17"}],
        "grants": [{"token": "tok", "requestId": "g-1", "resource": "vcs", "count": 3}],
    }
    held = parse_output("v2", "hosts", "list", raw, provider="p")
    assert held.machines == [Machine(machine_id="i-9", name="h9", status="running", template="T", launched_at=17.0)]
    assert held.grants == [HeldGrant(token="tok", request_id="g-1", resource="vcs", count=3)]
    assert parse_output("v2", "hosts", "list", {}, provider="p").machines == []


def test_v2_usage_answer():
    raw = {"resource": "vcs", "in_use": 7, "total": 25, "message": ""}
    got = parse_output("v2", "units", "usage", raw, provider="p")
    assert got == Usage(resource="vcs", in_use=7, total=25)
    with pytest.raises(ContractError, match="in_use: Input should be greater than or equal to 0"):
        parse_output("v2", "units", "usage", {"resource": "vcs", "in_use": -1}, provider="p")
