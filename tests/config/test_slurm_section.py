"""The config's ``slurm:`` section (issue 29): its hostlists, node sets and providers are checked, each error named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from config.load import load_config
from config.located import ConfigError

BASE = """
instance: {id: a, serves: [aws, lic], planner: true}
controller: {url: "sqlite:///state.db"}
providers:
  - {name: aws, kind: hosts, script: {style: v2, path: /bin/true}}
  - {name: lic, kind: units, script: {style: v2, path: /bin/true}}
"""


def load(tmp_path: Path, slurm: str):
    path = tmp_path / "provisioner.yaml"
    path.write_text(BASE + textwrap.dedent(slurm))
    return load_config(path, check_files=False)


def test_a_good_section_reads_as_written(tmp_path):
    cfg = load(tmp_path, """
        slurm:
          nodes:
            - {names: "cloud[1-4]", provider: aws, template: t3-large}
            - {names: "gpu[1-2],big7", provider: aws, template: p3}
          partitions: [dyn]
          sync_every: 5s
        """)
    assert [n.names for n in cfg.slurm.nodes] == ["cloud[1-4]", "gpu[1-2],big7"]
    assert cfg.slurm.partitions == ["dyn"] and cfg.slurm.sync_every == 5.0


@pytest.mark.parametrize(("slurm", "said"), [
    ('slurm: {nodes: [{names: "cloud[1-", provider: aws, template: t}]}',
     "provisioner.yaml:7: slurm.nodes[0].names: not a hostlist expression: 'cloud[1-' (unbalanced brackets)"),
    ('slurm: {nodes: [{names: "c[1-4]", provider: aws, template: t}, {names: "c4", provider: aws, template: u}]}',
     "slurm.nodes[1].names: node c4 is already in the node set at line 7"),
    ('slurm: {nodes: [{names: "c1", provider: awz, template: t}]}',
     "slurm.nodes[0].provider: no provider named 'awz' (did you mean 'aws'?)"),
    ('slurm: {nodes: [{names: "c1", provider: lic, template: t}]}',
     "provider 'lic' is of kind units; nodes need a hosts provider"),
    ('slurm: {nodes: [{names: "c1", provider: aws}]}', "slurm.nodes[0].template: missing required field"),
    ('slurm: {sync_evry: 5s}', "slurm.sync_evry: unknown field"),
])
def test_a_bad_section_names_the_place(tmp_path, slurm, said):
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, slurm)
    assert said in str(caught.value)


WARM = """
instance: {id: a, serves: [aws, dyn], planner: true}
controller: {url: "sqlite:///state.db"}
policy: {min_idle: %(global)s}
providers:
  - name: aws
    kind: hosts
    script: {style: v2, path: /bin/true}
    policy: {warm: [%(aws)s]}
  - {name: dyn, kind: hosts, script: {style: v2, path: /bin/true}, policy: {warm: [{min_idle: 2}]}}
slurm:
  nodes:
    - {names: "cloud[1-4]", provider: aws, template: t3-large}
  partitions: [dyn]
"""


def warm(tmp_path: Path, **over: str):
    path = tmp_path / "provisioner.yaml"
    path.write_text(WARM % {"global": "0", "aws": "", **over})
    return load_config(path, check_files=False)


@pytest.mark.parametrize(("over", "said"), [
    ({"global": "2"}, "provisioner.yaml:4: policy.min_idle: warm capacity of every hosts provider covers "
                      "aws/t3-large, the template of Slurm's power-saving nodes cloud[1-4] (slurm.nodes, line 13); "
                      "Slurm resumes and suspends those nodes by name, and a warm host has none, so it would never "
                      "join: keep them up with slurm.conf's SuspendExcNodes, or give it to a provider of dynamic "
                      "nodes (providers[].policy.warm)"),
    ({"aws": "{min_hosts: 1}"}, "provisioner.yaml:9: providers[0].policy.warm[0]: warm capacity covers "
                                "aws/t3-large, the template of Slurm's power-saving nodes cloud[1-4] (slurm.nodes[0], "
                                "line 13)"),
    ({"aws": "{template: t3-large, min_idle: 1}"}, "providers[0].policy.warm[0]: warm capacity covers aws/t3-large"),
])
def test_warm_capacity_over_power_saving_nodes_is_refused_naming_the_rule_and_the_node_set(tmp_path, over, said):
    with pytest.raises(ConfigError) as caught:
        warm(tmp_path, **over)
    assert said in str(caught.value)


def test_warm_capacity_of_another_template_or_a_dynamic_nodes_provider_is_taken(tmp_path):
    cfg = warm(tmp_path, aws="{template: m5.large, min_idle: 1}, {schedule: '08:00-09:00'}")
    assert [(r.template, r.min_idle) for r in cfg.providers[0].policy.warm] == [("m5.large", 1), (None, 0)]
    assert cfg.providers[1].policy.warm[0].min_idle == 2
