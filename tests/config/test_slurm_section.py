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
