"""What a script prints on stdout is scrubbed of its env_file values and bounded, before anyone keeps it."""

from __future__ import annotations

import pytest

from messages.description import ProviderDescription, Template
from messages.scripts import Accepted, Holdings, Machine, RequestState, StatusReport
from providers.contract import ContractError
from providers.environment import Scrubber
from providers.output import ID_LIMIT, TEXT_LIMIT, cleaned

SECRET = "s3cr3t-value-42"


def env(tmp_path):
    f = tmp_path / "p1.env"
    f.write_text(f"API_KEY={SECRET}\n")
    f.chmod(0o600)
    return f


def test_a_secret_in_a_status_message_and_in_ids_is_scrubbed(script, make_runner, results, tmp_path):
    path = script("""#!/bin/sh
cat <<EOF
{"requests": [{"requestId": "r-$API_KEY", "status": "running", "message": "still starting, key $API_KEY",
  "machines": [{"machineId": "m-$API_KEY", "name": "h-$API_KEY", "status": "booting with $API_KEY",
                "message": "$API_KEY"}]}]}
EOF
""")
    runner = make_runner(path, env_file=env(tmp_path))
    runner.submit("status", {"requests": [{"requestId": "r-1"}]})
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    [req] = result.output.requests
    assert (req.request_id, req.message) == ("r-***", "still starting, key ***")
    [m] = req.machines
    assert (m.machine_id, m.name, m.status, m.message) == ("m-***", "h-***", "booting with ***", "***")
    assert SECRET not in result.model_dump_json()


def test_a_secret_in_a_request_id_is_scrubbed(script, make_runner, results, tmp_path):
    path = script("""#!/bin/sh\necho "{\\"requestId\\": \\"r-$API_KEY\\", \\"message\\": \\"used $API_KEY\\"}"\n""")
    runner = make_runner(path, env_file=env(tmp_path))
    runner.submit("request", {"template": "T1", "count": 1}, token="t-1")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert result.output == Accepted(provider_request_id="r-***", message="used ***")


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
    scrub = Scrubber([SECRET])
    desc = ProviderDescription(name="p", kind="hosts", region=f"r-{SECRET}", attributes={f"k{SECRET}": SECRET},
                               templates=[Template(id=f"t-{SECRET}", max_number=1, attributes={"a": f"x{SECRET}"})])
    assert SECRET not in cleaned(desc, scrub).model_dump_json()
    held = Holdings(machines=[Machine(machine_id=SECRET, private_ip=SECRET)])
    assert cleaned(held, scrub).machines[0].private_ip == "***"
    plain = StatusReport(requests=[RequestState(request_id="r-1", status="running")])
    assert cleaned(plain, scrub) is plain, "an answer with nothing to change is handed on as it is"
    with pytest.raises(ContractError, match=r"^machines\[0\]\.machineId: 600 characters"):
        cleaned(Holdings(machines=[Machine(machine_id="m" * 600)]), scrub)
    with pytest.raises(ContractError, match=r"^templates\[0\]\.id: "):
        cleaned(ProviderDescription(name="p", kind="hosts", templates=[Template(id="t" * 600, max_number=1)]), scrub)


@pytest.mark.parametrize("secrets", [[], [SECRET]])
def test_only_a_string_to_scrub_or_to_bound_makes_a_copy(secrets) -> None:
    """The first look only reads: each string it passes must be one the full walk leaves as it is."""
    scrub = Scrubber(secrets)
    machines = [Machine(machine_id=f"m{i}", name=f"h{i}", status="running", template="t") for i in range(50)]
    held = Holdings(machines=machines)
    assert cleaned(held, scrub) is held
    wordy = StatusReport(requests=[RequestState(request_id="r", status="running", message="w" * (ID_LIMIT + 1))])
    assert cleaned(wordy, scrub) is wordy, "free text longer than an identifier may be, within its own bound"
    long_id = Holdings(machines=[*machines, Machine(machine_id="m" * (ID_LIMIT + 1))])
    with pytest.raises(ContractError, match=r"^machines\[50\]\.machineId: "):
        cleaned(long_id, scrub)
    if secrets:
        keyed = ProviderDescription(name="p", kind="hosts", attributes={f"k{SECRET}": "v"})
        assert SECRET not in cleaned(keyed, scrub).model_dump_json(), "a secret in a key alone"
        last = Holdings(machines=[*machines, Machine(machine_id="m", message=SECRET)])
        assert cleaned(last, scrub).machines[-1].message == "***"
