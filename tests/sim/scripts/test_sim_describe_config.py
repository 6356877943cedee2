"""describe matches what the daemon validates; bad config or environment disables the provider with exit 78."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from messages.description import ProviderDescription
from tests.support.simprov import SCRIPT, Sim, hosts_config, minimal_env, units_config


def test_hosts_describe_validates_as_a_provider_description(tmp_path):
    sim = Sim(tmp_path, hosts_config(lead_time={"min": 60, "max": 180}, min_hold=600, capacity=40,
                                     attributes={"cloud": "sim"}))
    desc = ProviderDescription.model_validate({**sim.call("describe"), "name": "sim-a"})
    assert desc.kind == "hosts"
    assert desc.priority == 10
    assert desc.lead_time_s == 120
    assert desc.min_hold_s == 600
    assert desc.capacity == 40
    assert (desc.region, desc.zone) == ("sim-region", "sim-a")
    assert desc.attributes == {"cloud": "sim"}
    small, large = desc.templates
    assert (small.id, small.max_number, small.attributes["ncpus"]) == ("sim-small", 50, 4)
    assert small.zone == "sim-a"
    assert desc.price("sim-large") == 0.9 and desc.price("sim-small") == 0.1
    assert large.priority == 20 and small.priority is None
    assert desc.pools == []


def test_units_describe_lists_pools(tmp_path):
    sim = Sim(tmp_path, units_config(min_request=2, step=2))
    desc = ProviderDescription.model_validate({**sim.call("describe"), "name": "vcs-pool"})
    assert desc.kind == "units"
    assert [(p.resource, p.capacity) for p in desc.pools] == [("vcs", 10), ("xcelium", 4)]
    assert desc.price("vcs") == 2.5 and desc.price("xcelium") == 1.0
    assert (desc.min_request, desc.step) == (2, 2)
    assert desc.templates == []


def test_runs_on_the_standard_library_alone(tmp_path):
    """Isolated mode without site-packages: the script imports nothing of the project or of pip."""
    sim = Sim(tmp_path, hosts_config())
    r = subprocess.run([sys.executable, "-I", "-S", *sim.argv("describe")], env=sim.env(),
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["templates"][0]["id"] == "sim-small"


def _without(key):
    cfg = hosts_config()
    del cfg[key]
    return cfg


def _template(**fields):
    t = {"id": "sim-small", "max_number": 5}
    t.update(fields)
    return hosts_config(templates=[t])


@pytest.mark.parametrize(
    "config, field",
    [
        (_without("kind"), "kind: is required"),
        (hosts_config(kind="vms"), "kind: must be 'hosts' or 'units'"),
        (_template(max_number=-1), "templates[0].max_number: must be >= 0"),
        (_template(attributes={"ncpus": [4]}), "templates[0].attributes.ncpus"),
        (hosts_config(lead_tme=5), "lead_tme: unknown key"),
        (hosts_config(lead_time={"min": 60, "max": 10}), "lead_time: max (10) is below min (60)"),
        (hosts_config(fail_rate=1.5), "fail_rate: must be between 0 and 1"),
        (hosts_config(faults=[{"action": "request", "times": 2}]), "faults[0].exit: give exactly one"),
        (hosts_config(faults=[{"action": "launch", "exit": 69}]), "faults[0].action: must be one of"),
        (hosts_config(templates=[{"id": "a", "max_number": 1}, {"id": "a", "max_number": 2}]),
         "templates[1]: duplicate"),
        (units_config(pools=[]), "pools: a units provider needs at least one pool"),
        (hosts_config(name_prefix="bad prefix"), "name_prefix: must match"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_config_exits_78_naming_file_and_field(tmp_path, config, field):
    sim = Sim(tmp_path, config)
    r = sim.run("describe")
    assert r.returncode == 78
    assert str(sim.config_path) in r.stderr
    assert field in r.stderr
    assert r.stdout == ""


def test_missing_environment_is_a_configuration_error(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    r = sim.run("describe", env=minimal_env(tmp_path, SIM_STATE_DIR=str(sim.state_dir)))
    assert r.returncode == 78 and "SIM_CONFIG" in r.stderr
    r = sim.run("describe", env=minimal_env(tmp_path, SIM_CONFIG=str(sim.config_path)))
    assert r.returncode == 78 and "SIM_STATE_DIR" in r.stderr


def test_unreadable_clock_file_is_a_configuration_error(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    sim.now_file.write_text("soon")
    r = sim.run("describe")
    assert r.returncode == 78 and "SIM_NOW_FILE" in r.stderr and "soon" in r.stderr


@pytest.mark.parametrize(
    "action, doc, field",
    [
        ("request", {"token": "t", "template": "sim-small", "count": 0}, "request input: count"),
        ("request", {"template": "sim-small", "count": 1}, "request input: token"),
        ("request", {"token": "t", "resource": "vcs", "count": 1}, "request input: resource"),
        ("request", {"token": "t", "template": "sim-huge", "count": 1}, "request input: template: 'sim-huge'"),
        ("status", {"requests": [{"id": "x"}]}, "status input: requests[0].requestId"),
        ("return", {"token": "t", "machines": [{"ip": "10.0.0.1"}]}, "return input: machines[0]"),
        ("usage", {"resource": "vcs"}, "usage input: resource"),
    ],
)
def test_bad_input_exits_65_naming_the_field_and_changes_nothing(tmp_path, action, doc, field):
    sim = Sim(tmp_path, hosts_config())
    r = sim.run(action, doc)
    assert r.returncode == 65
    assert field in r.stderr
    dump = sim.dump()
    assert dump["machines"] == {} and dump["requests"] == {}


def test_usage_line_for_an_unknown_action(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    r = subprocess.run([str(SCRIPT), "launch", "-f", "x"], env=sim.env(), capture_output=True, text=True, timeout=10)
    assert r.returncode == 64 and "usage: sim-provider" in r.stderr
