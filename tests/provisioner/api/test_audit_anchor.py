"""The audit log's ends cannot be cut silently: verify checks it against the audited facts the controller holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from messages.description import ProviderDescription
from messages.facts import Decision, InstanceSeen, ProviderDescribed, make_fact
from persistence.controller import open_controller
from provisioner.audit.log import AuditLog


@pytest.fixture
def c(tmp_path: Path):
    controller = open_controller(f"sqlite:///{tmp_path / 'state.db'}")
    yield controller
    controller.close()


def write(c, n: int, start: int = 0) -> None:
    """``n`` audited facts, each followed by one that is not audited."""
    out = []
    for i in range(start, start + n):
        out.append(make_fact(Decision(item=f"d{i}", need=i), now=1_700_000_000.0 + i))
        out.append(make_fact(InstanceSeen(machine_id=f"m{i}", name=f"h{i}"), provider="p", now=1_700_000_000.0 + i))
    c.append(out)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def cut(path: Path, keep) -> None:
    kept = keep(lines(path))
    path.write_text("".join(line + "\n" for line in kept))


@pytest.fixture
def log(tmp_path: Path, c) -> AuditLog:
    audit = AuditLog(tmp_path / "home" / "audit.log")
    write(c, 6)
    assert audit.catch_up(c) == 6
    result = audit.verify(c)
    assert result.ok and result.lines == 6, result.problem
    return audit


def test_the_log_holds_every_audited_fact_in_order_whoever_wrote_it(tmp_path, c, log) -> None:
    seqs = [json.loads(x)["seq"] for x in lines(log.path)]
    assert seqs == [1, 3, 5, 7, 9, 11], "the decisions, not the instances"
    write(c, 2, start=6)  # another writer's facts: not looked at yet, and no line is missing for that
    assert log.verify(c).ok
    assert log.catch_up(c) == 2 and log.catch_up(c) == 0, "each fact once"
    assert log.verify(c).ok and log.verify(c).lines == 8


@pytest.mark.parametrize("how,problem", [
    ("the last line", "audit.log:5: the log ends at fact 9, but it was written through seq 12: fact 11 "),
    ("the first line", "audit.log:1: prev does not match the line before: it is not the start of the chain"),
    ("every line", "audit.log: the log is empty, but the controller holds audited facts"),
    ("the file", "audit.log: the log is missing, but the controller holds audited facts"),
])
def test_a_cut_end_or_a_removed_log_is_caught(log, c, how: str, problem: str) -> None:
    if how == "the last line":
        cut(log.path, lambda ls: ls[:-1])
    elif how == "the first line":
        cut(log.path, lambda ls: ls[1:])
    elif how == "every line":
        log.path.write_text("")
    else:
        log.path.unlink()
    result = log.verify(c)
    assert not result.ok and result.problem.startswith(problem), result.problem
    assert result.problem.endswith(("cut", "were cut", "removed")), result.problem


def test_a_cut_tail_stays_caught_as_writers_go_on(log, c) -> None:
    cut(log.path, lambda ls: ls[:-2])
    write(c, 3, start=6)
    log.catch_up(c)  # the new lines chain on from what is left: the chain alone would look whole
    result = log.verify(c)
    assert not result.ok and "fact 9 (decision" in result.problem and "before this line is missing" in result.problem


def test_without_its_head_the_log_is_held_to_the_whole_controller(log, c) -> None:
    log.head_path.unlink()
    assert log.verify(c).ok, "a whole log passes without its head"
    cut(log.path, lambda ls: ls[:-1])
    result = log.verify(c)
    assert not result.ok and "its last lines were cut" in result.problem


def test_a_line_the_controller_does_not_hold_is_caught(tmp_path, log) -> None:
    other = open_controller(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        write(other, 6)
        result = log.verify(other)
        assert not result.ok and "is not in the controller" in result.problem or "in the controller, not" in \
            result.problem, result.problem
    finally:
        other.close()


def test_rotation_passes_and_a_missing_rotated_file_is_caught(tmp_path, c) -> None:
    log = AuditLog(tmp_path / "home" / "audit.log", max_bytes=2_000, keep=3)
    for i in range(40):
        write(c, 1, start=i)
        log.catch_up(c)
    assert [p.name for p in log.files()] == ["audit.log.3", "audit.log.2", "audit.log.1", "audit.log"]
    result = log.verify(c)
    assert result.ok and result.starts_after_rotation and result.lines < 40, result.problem
    assert log.read_head().dropped_seq > 0, "the head remembers what rotation deleted"

    middle = tmp_path / "home" / "audit.log.2"
    saved = middle.read_bytes()
    middle.unlink()
    result = log.verify(c)
    assert not result.ok and result.problem.startswith("audit.log.1:1: prev does not match"), result.problem
    middle.write_bytes(saved)

    oldest = tmp_path / "home" / "audit.log.3"
    oldest.unlink()
    result = log.verify(c)
    assert not result.ok and result.problem.startswith("audit.log.2:1: prev does not match the line before: the "
                                                       "line before it went with a rotated file"), result.problem


@pytest.mark.slow  # real processes
def test_provisioner_audit_verify_catches_a_cut_last_line(tmp_path) -> None:
    """The CLI audits what it appends; cutting the last line of its log must not pass ``audit verify``."""
    env = {**os.environ, "PROVISIONER_HOME": str(tmp_path / "home")}
    url = f"sqlite:///{tmp_path / 'state.db'}"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", url, *args],
                              capture_output=True, text=True, timeout=60, env=env)

    c = open_controller(url)
    c.append([make_fact(ProviderDescribed(description=ProviderDescription(name="p", kind="hosts")), provider="p",
                        now=1.0)])
    c.close()
    for reason in ("one", "two", "three"):
        r = cli("provider", "pause", "p", "--reason", reason)
        assert r.returncode == 0, r.stderr
    path = tmp_path / "home" / "audit.log"
    assert len(lines(path)) == 3
    assert cli("audit", "verify").returncode == 0
    cut(path, lambda ls: ls[:-1])
    r = cli("audit", "verify")
    assert r.returncode == 1 and "its last lines were cut" in r.stderr, (r.stdout, r.stderr)


@pytest.mark.slow
def test_a_daemon_log_mirrors_other_writers_and_its_cut_tail_is_caught_over_rest(start_api, tmp_path) -> None:
    from tests.support.daemons import wait_until

    api = start_api()
    api.demand_round()
    assert api.ok("GET", "/v1/audit/verify")["ok"]
    # Another writer (the CLI, with a home of its own) appends an operator's fact: the daemon's log takes it too.
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", api.cfg.controller.url,
                        "provider", "pause", "units", "--reason", "from elsewhere"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PROVISIONER_HOME": str(tmp_path / "cli-home")})
    assert r.returncode == 0, r.stderr
    wait_until(lambda: "from elsewhere" in api.daemon.audit.path.read_text(), timeout=30,
               what="the daemon's auditor to take the CLI's fact")
    verified = api.ok("GET", "/v1/audit/verify")
    assert verified["ok"], verified
    cut(api.daemon.audit.path, lambda ls: ls[:-1])
    verified = api.ok("GET", "/v1/audit/verify")
    # Lines the daemon appends meanwhile chain on from the cut: the fact is then missing before them.
    assert not verified["ok"] and ("its last lines were cut" in verified["problem"]
                                   or "before this line is missing" in verified["problem"]), verified
