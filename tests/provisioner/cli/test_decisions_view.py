"""``provisioner decisions`` prints each decision with its candidates in rank order (issue 20, item 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from messages.facts import Candidate, Chosen, Decision, Rejected, make_fact
from persistence.controller import open_controller

pytestmark = pytest.mark.slow  # real processes: the command line run as an operator runs it

DECISION = Decision(
    item="batch", demand_seq=7, need=6, in_flight=0, note="",
    chosen=[Chosen(provider="cloud", template="medium", count=6)],
    rejected=[Rejected(provider="aws-east", reason="capacity: room for 0")],
    candidates=[Candidate(provider="aws-east", template="m5.large", why="capacity: room for 0"),
                Candidate(provider="cloud", template="medium", count=6),
                Candidate(provider="gcp", template="n2", why="not needed: covered by cloud"),
                Candidate(provider="arm", why="no template has attribute gpus")])


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_decisions_table_lists_every_candidate_in_rank_order_with_what_happened(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    c = open_controller(url)
    c.append([make_fact(DECISION, provider="", now=1_800_000_000.0)])
    c.close()
    env = {"PROVISIONER_HOME": str(tmp_path / "home"), "TZ": "UTC"}
    r = cli("--controller", url, "decisions", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "2027-01-15 08:00:00  batch (demand 7): need 6, in flight 0",
        "  1. aws-east/m5.large  capacity: room for 0",
        "  2. cloud/medium       took 6",
        "  3. gcp/n2             not needed: covered by cloud",
        "  4. arm                no template has attribute gpus",
    ]
    rows = json.loads(cli("--controller", url, "decisions", "-o", "json", env=env).stdout)
    assert rows[0]["candidates"][3] == {"provider": "arm", "template": None, "resource": None, "count": 0,
                                        "bundles": None, "why": "no template has attribute gpus"}
