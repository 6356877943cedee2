"""Slurm's JSON read for each data version (issue 29): 22.05's v0.0.38 as captured from a real slurmctld, the
newer shapes as Slurm's OpenAPI describes them; unknown versions and bad documents refused, naming the place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm.formats import FormatError, jobs, nodes

FIXTURES = Path(__file__).parent / "fixtures"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_22_05_nodes_keep_the_base_state_and_the_flags_apart():
    got = nodes(read("sinfo-v0.0.38.json"))
    assert [(n.name, n.state, sorted(n.flags)) for n in got] == [
        ("cloud1", "IDLE", ["CLOUD", "POWERED_DOWN"]), ("cloud2", "IDLE", ["CLOUD", "POWERED_DOWN"]),
        ("cloud3", "IDLE", ["CLOUD", "POWERED_DOWN"])]
    assert got[0].cpus == 2 and got[0].partitions == ("p",) and got[0].address == "cloud1"


def test_22_05_jobs_read_as_the_demand_needs_them():
    (job,) = jobs(read("squeue-v0.0.38.json"))
    assert (job.job_id, job.state, job.partition, job.node_count, job.cpus_per_node, job.memory_per_node) == \
        (1, "PENDING", "p", 1, 2, None)


@pytest.mark.parametrize("version", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_newer_shapes_read_the_same_fields(version):
    got = {n.name: n for n in nodes(read(f"nodes-{version}.json"), "scontrol show nodes --json")}
    assert got["cloud1"].state == "ALLOCATED" and got["cloud1"].flags == {"CLOUD"}
    assert got["cloud2"].state == "IDLE" and got["cloud2"].flags == {"CLOUD", "POWERED_DOWN"}
    assert got["cloud3"].state == "DOWN" and "NOT_RESPONDING" in got["cloud3"].flags
    assert got["cloud3"].reason == "ResumeTimeout reached" and got["cloud1"].real_memory == 7800
    pending, done = jobs(read(f"squeue-{version}.json"))
    assert (pending.state, pending.reason, pending.node_count, pending.cpus_per_node, pending.memory_per_node,
            pending.features, pending.licenses) == ("PENDING", "Resources", 2, 4, 4000, "gpu&fast", "vcs@flex:2")
    assert done.state == "COMPLETED" and done.memory_per_node == 500, "memory per CPU is multiplied out"


def test_an_unknown_version_is_refused_naming_it():
    doc = json.loads(read("nodes-v0.0.42.json"))
    doc["meta"]["plugin"]["data_parser"] = "data_parser/v0.0.44"
    with pytest.raises(FormatError, match=r"scontrol show nodes --json: Slurm's JSON of data version v0.0.44 is "
                                          r"not one this bridge reads"):
        nodes(json.dumps(doc), "scontrol show nodes --json")
    doc["meta"] = {"Slurm": {"version": {"major": 26, "minor": 5, "micro": 0}}}
    with pytest.raises(FormatError, match=r"unknown data version \(release 26.05\)"):
        nodes(json.dumps(doc))


@pytest.mark.parametrize("text, says", [
    ("sinfo: error: Unable to contact slurm controller", "sinfo --json: output is not JSON"),
    ("[1, 2]", "sinfo --json: output is not a JSON object"),
    ('{"nodes": []}', "sinfo --json: no meta in the output"),
])
def test_what_is_not_slurm_json_is_one_line_naming_the_command(text, says):
    with pytest.raises(FormatError) as err:
        nodes(text)
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_a_node_without_a_state_names_the_node_and_the_field():
    doc = json.loads(read("nodes-v0.0.41.json"))
    del doc["nodes"][1]["state"]
    with pytest.raises(FormatError, match=r"scontrol show nodes --json \(v0.0.41\): node cloud2: no field state"):
        nodes(json.dumps(doc), "scontrol show nodes --json")
    doc = json.loads(read("squeue-v0.0.40.json"))
    doc["jobs"][0]["cpus"] = {"set": True, "infinite": False, "number": "eight"}
    with pytest.raises(FormatError, match=r"job 7: cpus: 'eight' is not a number"):
        jobs(json.dumps(doc))
