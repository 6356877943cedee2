"""The audit log's hash chain: intact across writers and rotation, broken by any edit, checked by the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from messages.facts import Decision, InstanceChanged, InstanceSeen, LeaseChanged, Order, ProviderAdmin, make_fact
from persistence.controller import open_controller
from provisioner.audit.log import GENESIS, AuditLog, audited
from provisioner.read.views import BadCursor
from tests.support.daemons import end_process
from tests.support.facts import decisions as facts

pytestmark = pytest.mark.slow


def test_only_decisions_orders_admin_orphans_and_leases_are_audited():
    yes = [Decision(item="d1"), Order(action="return", supply="hosts", machines=["m"], count=1),
           ProviderAdmin(kind="provider_paused"), LeaseChanged(kind="lease_lost", name="planner", holder="a", fence=2),
           InstanceChanged(kind="instance_orphan_found", machine_id="m", state="orphaned"),
           InstanceSeen(machine_id="m", name="n", state="orphaned")]
    no = [InstanceSeen(machine_id="m", name="n"),
          InstanceChanged(kind="instance_joined", machine_id="m", state="joined")]
    assert [audited(make_fact(p)) for p in yes] == [True] * len(yes)
    assert [audited(make_fact(p)) for p in no] == [False] * len(no)


def test_chain_links_every_line_and_verifies(tmp_path):
    log = AuditLog(tmp_path / "audit.log")
    assert log.record(facts(3)) == 3
    assert log.record([make_fact(InstanceSeen(machine_id="m", name="n"))]) == 0
    AuditLog(tmp_path / "audit.log").record(facts(2, start=4))  # another writer continues the same chain
    lines = [json.loads(x) for x in (tmp_path / "audit.log").read_text().splitlines()]
    assert [x["seq"] for x in lines] == [1, 2, 3, 4, 5]
    assert lines[0]["prev"] == GENESIS
    assert all(b["prev"] == a["hash"] for a, b in zip(lines, lines[1:]))
    assert lines[2]["what"] == "decision for d3: need 3, in flight 0: nothing"
    result = log.verify()
    assert result.ok and result.lines == 5 and not result.starts_after_rotation
    assert [x["seq"] for x in log.read(after=lines[1]["hash"], limit=2)] == [3, 4]
    assert [x["seq"] for x in log.read(limit=2)] == [4, 5]
    with pytest.raises(BadCursor):
        log.read(after="f" * 64)


@pytest.mark.parametrize("edit,problem", [
    (lambda ls: ls.__setitem__(2, ls[2].replace('"need":3', '"need":30')), "audit.log:3: hash does not match"),
    (lambda ls: ls.pop(2), "audit.log:3: prev does not match the line before"),
    (lambda ls: ls.insert(1, ls[3]), "audit.log:2: prev does not match the line before"),
    (lambda ls: ls.__setitem__(4, "not json at all"), "audit.log:5: not an audit line"),
])
def test_any_edit_breaks_the_chain_where_it_happened(tmp_path, edit, problem):
    log = AuditLog(tmp_path / "audit.log")
    log.record(facts(6))
    lines = (tmp_path / "audit.log").read_text().splitlines()
    edit(lines)
    (tmp_path / "audit.log").write_text("\n".join(lines) + "\n")
    result = log.verify()
    assert not result.ok and result.problem.startswith(problem), result.problem


def test_a_rewritten_line_with_its_own_hash_recomputed_still_breaks_the_next_link(tmp_path):
    from provisioner.audit.log import _line, parse

    log = AuditLog(tmp_path / "audit.log")
    log.record(facts(4))
    lines = (tmp_path / "audit.log").read_bytes().splitlines(keepends=True)
    doc = parse(lines[1])
    body = {k: v for k, v in doc.items() if k not in ("prev", "hash")}
    body["what"] = "nothing to see here"
    lines[1], _ = _line(body, doc["prev"])
    (tmp_path / "audit.log").write_bytes(b"".join(lines))
    result = log.verify()
    assert not result.ok and result.problem.startswith("audit.log:3: prev does not match")


def test_rotation_by_size_keeps_the_chain_across_files(tmp_path):
    log = AuditLog(tmp_path / "audit.log", max_bytes=2_000, keep=3)
    for i in range(1, 41):
        log.record(facts(1, start=i))
    files = log.files()
    assert [p.name for p in files] == ["audit.log.3", "audit.log.2", "audit.log.1", "audit.log"]
    assert all(p.stat().st_size <= 2_000 for p in files)
    result = log.verify()
    assert result.ok and result.starts_after_rotation, "the oldest lines were rotated away; what is kept links up"
    kept = [x["seq"] for x in log.read(after=None, limit=1000)]
    assert kept == list(range(kept[0], 41))
    first_of_live = json.loads((tmp_path / "audit.log").read_text().splitlines()[0])
    last_of_rotated = json.loads((tmp_path / "audit.log.1").read_text().splitlines()[-1])
    assert first_of_live["prev"] == last_of_rotated["hash"]
    assert [x["seq"] for x in log.read(after=last_of_rotated["hash"], limit=2)] == [first_of_live["seq"],
                                                                                  first_of_live["seq"] + 1]
    assert oct(files[-1].stat().st_mode & 0o777) == "0o600"


def test_cli_audit_shows_and_verifies_the_local_log(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "PROVISIONER_HOME": str(home)}
    url = f"sqlite:///{tmp_path / 'state.db'}"
    c = open_controller(url)
    c.append([make_fact(Decision(item=f"d{i}", need=i), now=1_700_000_000.0 + i) for i in range(1, 4)])
    AuditLog(home / "audit.log").catch_up(c)
    c.close()

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", url, *args],
                              capture_output=True, text=True, timeout=60, env=env)

    r = cli("audit", "verify")
    assert r.returncode == 0 and r.stdout.strip() == "audit log intact: 3 lines", r.stderr
    shown = json.loads(cli("audit", "-o", "json").stdout)
    assert [x["seq"] for x in shown] == [1, 2, 3]
    table = cli("audit").stdout
    assert "decision for d2: need 2" in table and "HASH" not in table
    text = (home / "audit.log").read_text().replace('"need":2', '"need":9')
    (home / "audit.log").write_text(text)
    r = cli("audit", "verify")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == "provisioner: audit log broken: audit.log:2: hash does not match the line's " \
                               "content: the line was changed"


def test_cli_audit_follow_prints_the_last_lines_then_new_ones(tmp_path):
    home = tmp_path / "home"
    log = AuditLog(home / "audit.log")
    log.record(facts(2))
    proc = subprocess.Popen([sys.executable, "-m", "provisioner.cli", "--controller", f"sqlite:///{tmp_path}/s.db",
                             "audit", "--follow", "--limit", "1", "-o", "json"], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PROVISIONER_HOME": str(home)})
    try:
        assert json.loads(proc.stdout.readline())["seq"] == 2, "the last line first, as tail -f does"
        log.record(facts(2, start=3))
        assert [json.loads(proc.stdout.readline())["seq"] for _ in range(2)] == [3, 4]
    finally:
        end_process(proc)


def test_a_damaged_last_line_does_not_stop_auditing(tmp_path):
    log = AuditLog(tmp_path / "audit.log")
    log.record(facts(3))
    text = (tmp_path / "audit.log").read_text().replace('"need":3', '"need":7')
    (tmp_path / "audit.log").write_text(text)
    assert AuditLog(tmp_path / "audit.log").record(facts(1, start=4)) == 1
    lines = (tmp_path / "audit.log").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[3])["seq"] == 4
    result = log.verify()
    assert not result.ok and result.problem.startswith("audit.log:3: hash does not match")
