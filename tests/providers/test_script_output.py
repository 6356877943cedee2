"""What a script prints on stdout: its secrets kept out, its identifiers kept exact, everything bounded."""

from __future__ import annotations

import logging

import pytest

from messages.description import ProviderDescription, Template
from messages.scripts import Accepted, HeldGrant, Holdings, Machine, RequestStatus, StatusReport
from providers.contract import ContractError
from providers.environment import Scrubber
from providers.output import ID_LIMIT, TEXT_LIMIT, cleaned

SECRET = "s3cr3t-value-42"
REGION = "us-west-2"
#: A script that prints, as its answer, the JSON document given here with $NAME replaced from its environment.
PRINTS = """#!/usr/bin/env python3
import os, string, sys
sys.stdout.write(string.Template({doc!r}).substitute(os.environ))
"""


def env(tmp_path, extra: str = ""):
    f = tmp_path / "p1.env"
    f.write_text(f"API_KEY={SECRET}\nAWS_DEFAULT_REGION={REGION}\n{extra}")
    f.chmod(0o600)
    return f


def printing(script, doc: str):
    return script(PRINTS.format(doc=doc))


def test_a_secret_in_free_text_is_scrubbed_and_a_region_is_left_alone(script, make_runner, results, tmp_path):
    path = printing(script, """{"requests": [{"requestId": "r-$AWS_DEFAULT_REGION-1", "status": "running",
      "message": "still starting in $AWS_DEFAULT_REGION, key $API_KEY",
      "machines": [{"machineId": "i-0a1b", "name": "ip-10-20-1-4.$AWS_DEFAULT_REGION.compute.internal",
                    "status": "booting with $API_KEY", "message": "$API_KEY"}]}]}""")
    runner = make_runner(path, env_file=env(tmp_path))
    runner.submit("status", {"requests": [{"requestId": f"r-{REGION}-1"}]})
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    [req] = result.output.requests
    assert (req.request_id, req.message) == (f"r-{REGION}-1", f"still starting in {REGION}, key ***")
    [m] = req.machines
    assert (m.machine_id, m.name, m.status, m.message) == (
        "i-0a1b", f"ip-10-20-1-4.{REGION}.compute.internal", "booting with ***", "***")
    assert SECRET not in result.model_dump_json()


def test_a_secret_in_a_machine_name_is_bad_output_naming_the_field(script, make_runner, results, tmp_path):
    path = printing(script, """{"requests": [{"requestId": "r-1", "status": "running", "machines": [
      {"machineId": "i-1", "name": "h-1"}, {"machineId": "i-2", "name": "h-$API_KEY"}]}]}""")
    runner = make_runner(path, env_file=env(tmp_path))
    runner.submit("status", {"requests": [{"requestId": "r-1"}]})
    [result] = results.wait(1)
    assert result.outcome == "bad_output"
    assert result.reason == ("p1 status: bad output: requests[0].machines[1].name: holds the value of API_KEY, "
                             "a secret of the env_file (an identifier is kept exactly or refused, never masked)")
    assert result.output is None and SECRET not in result.model_dump_json()


def test_a_secret_in_a_request_id_is_bad_output(script, make_runner, results, tmp_path):
    path = printing(script, '{"requestId": "r-$API_KEY", "message": "used $API_KEY"}')
    runner = make_runner(path, env_file=env(tmp_path))
    runner.submit("request", {"template": "T1", "count": 1}, token="t-1")
    [result] = results.wait(1)
    assert result.outcome == "bad_output"
    assert result.reason.startswith("p1 request: bad output: requestId: holds the value of API_KEY"), result.reason
    assert SECRET not in result.model_dump_json()


def test_a_variable_the_config_lists_is_a_secret_too(script, make_runner, results, tmp_path):
    path = printing(script, '{"requestId": "r-1", "message": "licensed by $LIC_SERVER"}')
    listed = make_runner(path, env_file=env(tmp_path, "LIC_SERVER=27000@lic1\n"), secrets=["LIC_SERVER"])
    listed.submit("request", {"template": "T1", "count": 1}, token="t-1")
    [result] = results.wait(1)
    assert result.output == Accepted(provider_request_id="r-1", message="licensed by ***")


def test_a_variable_neither_named_nor_listed_secret_is_not_masked(script, make_runner, results, tmp_path):
    path = printing(script, '{"requestId": "r-1", "message": "licensed by $LIC_SERVER"}')
    runner = make_runner(path, env_file=env(tmp_path, "LIC_SERVER=27000@lic1\n"))
    runner.submit("request", {"template": "T1", "count": 1}, token="t-1")
    [result] = results.wait(1)
    assert result.output == Accepted(provider_request_id="r-1", message="licensed by 27000@lic1")


def test_a_secret_too_short_to_mask_is_warned_about_once(script, make_runner, results, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="providers.runner")
    path = printing(script, '{"requestId": "r-1", "message": "pw $DB_PASSWORD"}')
    runner = make_runner(path, env_file=env(tmp_path, "DB_PASSWORD=pw1\n"))
    for i in range(3):
        runner.submit("request", {"template": "T1", "count": 1}, token=f"t-{i}")
    done = results.wait(3)
    warned = [r.getMessage() for r in caplog.records if "DB_PASSWORD" in r.getMessage()]
    assert warned == [f"provider p1: {tmp_path / 'p1.env'}: DB_PASSWORD is a secret shorter than 4 characters, "
                      "not masked in what its scripts print (a longer value is; an empty one has nothing to hide)"]
    assert done[0].output.message == "pw pw1", "too short to mask: left as it is, as documented"


def test_a_secret_spelt_with_json_escapes_is_scrubbed_all_the_same(script, make_runner, results, tmp_path):
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET)  # the script prints \u0073\u0033...
    path = script("#!/bin/sh\ncat <<'END'\n" + f'{{"requestId": "r-1", "message": "key {escaped}"}}' + "\nEND\n")
    runner = make_runner(path, env_file=env(tmp_path))
    runner.submit("request", {"template": "T1", "count": 1}, token="t-1")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert result.output.message == "key ***"


def test_a_huge_request_id_is_bad_output_naming_the_field(script, make_runner, results, tmp_path):
    path = script("""#!/usr/bin/env python3
import json, sys
json.dump({"requestId": "r" * (10 * 1024 * 1024), "message": "ok"}, sys.stdout)
""")
    runner = make_runner(path)
    runner.submit("request", {"template": "T1", "count": 1}, token="t-1")
    [result] = results.wait(1)
    assert result.outcome == "bad_output"
    assert f"requestId: {10 * 1024 * 1024} characters, at most {ID_LIMIT}" in result.reason, result.reason
    assert result.output is None and len(result.model_dump_json()) < 100_000, "no 10 MB anywhere in the result"


def test_a_huge_message_is_cut_not_refused(script, make_runner, results, tmp_path):
    path = script("""#!/usr/bin/env python3
import json, sys
json.dump({"requests": [{"requestId": "r-1", "status": "running", "message": "x" * 5_000_000}]}, sys.stdout)
""")
    runner = make_runner(path)
    runner.submit("status", {"requests": [{"requestId": "r-1"}]})
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    message = result.output.requests[0].message
    assert len(message) == TEXT_LIMIT and message.endswith("...")


def test_every_string_of_every_answer_is_walked() -> None:
    scrub = Scrubber({"API_KEY": SECRET})
    desc = ProviderDescription(name="p", kind="hosts", region=REGION, attributes={f"k{SECRET}": SECRET},
                               templates=[Template(id="t-1", max_number=1, attributes={"a": f"x{SECRET}"})])
    assert SECRET not in cleaned(desc, scrub).model_dump_json()
    assert cleaned(desc, scrub).region == REGION
    plain = StatusReport(requests=[RequestStatus(request_id="r-1", status="running")])
    assert cleaned(plain, scrub) is plain, "an answer with nothing to change is handed on as it is"
    with pytest.raises(ContractError, match=r"^machines\[0\]\.machineId: 600 characters"):
        cleaned(Holdings(machines=[Machine(machine_id="m" * 600)]), scrub)
    with pytest.raises(ContractError, match=r"^templates\[0\]\.id: "):
        cleaned(ProviderDescription(name="p", kind="hosts", templates=[Template(id="t" * 600, max_number=1)]), scrub)


@pytest.mark.parametrize(("answer", "field"), [
    (Holdings(machines=[Machine(machine_id="m-1"), Machine(machine_id="m-2", private_ip=f"10.{SECRET}")]),
     "machines[1].privateIpAddress"),
    (Holdings(grants=[HeldGrant(token=f"g-{SECRET}", resource="vcs", count=1)]), "grants[0].token"),
    (ProviderDescription(name="p", kind="hosts", zone=f"{SECRET}a"), "zone"),
    (ProviderDescription(name="p", kind="hosts", templates=[Template(id=f"t-{SECRET}", max_number=1)]),
     "templates[0].id"),
    (StatusReport(requests=[RequestStatus(request_id="r", status="running",
                                         machines=[Machine(machine_id="m", template=SECRET)])]),
     "requests[0].machines[0].template"),
])
def test_an_identifier_holding_a_secret_is_refused_naming_the_field_not_the_value(answer, field) -> None:
    with pytest.raises(ContractError) as caught:
        cleaned(answer, Scrubber({"API_KEY": SECRET}))
    assert str(caught.value).startswith(f"{field}: holds the value of API_KEY, a secret of the env_file")
    assert caught.value.outcome == "bad_output" and SECRET not in str(caught.value)


@pytest.mark.parametrize("secrets", [{}, {"API_KEY": SECRET}])
def test_only_a_string_to_scrub_or_to_bound_makes_a_copy(secrets) -> None:
    """The first look only reads: each string it passes must be one the full walk leaves as it is."""
    scrub = Scrubber(secrets)
    machines = [Machine(machine_id=f"m{i}", name=f"h{i}", status="running", template="t") for i in range(50)]
    held = Holdings(machines=machines)
    assert cleaned(held, scrub) is held
    wordy = StatusReport(requests=[RequestStatus(request_id="r", status="running", message="w" * (ID_LIMIT + 1))])
    assert cleaned(wordy, scrub) is wordy, "free text longer than an identifier may be, within its own bound"
    long_id = Holdings(machines=[*machines, Machine(machine_id="m" * (ID_LIMIT + 1))])
    with pytest.raises(ContractError, match=r"^machines\[50\]\.machineId: "):
        cleaned(long_id, scrub)
    if secrets:
        keyed = ProviderDescription(name="p", kind="hosts", attributes={f"k{SECRET}": "v"})
        assert SECRET not in cleaned(keyed, scrub).model_dump_json(), "a secret in a key alone"
        last = Holdings(machines=[*machines, Machine(machine_id="m", message=SECRET)])
        assert cleaned(last, scrub).machines[-1].message == "***"
        with pytest.raises(ContractError, match=r"^machines\[50\]\.name: holds the value of API_KEY"):
            cleaned(Holdings(machines=[*machines, Machine(machine_id="m", name=f"h-{SECRET}")]), scrub)
