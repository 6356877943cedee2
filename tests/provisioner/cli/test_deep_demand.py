"""A demand nested 50,000 deep is a one-line error naming where it came from, not a traceback."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real processes: the command line run as an operator runs it

DEPTH = 50_000


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("name,text", [
    ("deep.yaml", "items: " + "[" * DEPTH + "]" * DEPTH + "\n"),
    ("deep.json", '{"items": ' + "[" * DEPTH + "]" * DEPTH + "}"),
    ("nested.yaml", "items:\n" + "".join("  " * i + "- \n" for i in range(1, 3000))),
])
def test_demand_put_of_a_deep_document_is_one_line_naming_the_file(tmp_path: Path, name: str, text: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    r = cli("--controller", f"sqlite:///{tmp_path / 'state.db'}", "demand", "put", str(f))
    assert r.returncode == 1, r.stderr[-500:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"{len(lines)} lines: {r.stderr[-500:]}"
    assert lines[0].startswith(f"provisioner: {f}:"), lines[0]
    assert "Traceback" not in r.stderr


def test_demand_put_from_stdin_names_stdin() -> None:
    r = cli("--controller", "sqlite:///unused.db", "demand", "put", "-",
            stdin="items: " + "[" * DEPTH + "]" * DEPTH + "\n")
    assert r.returncode == 1
    assert r.stderr.startswith("provisioner: stdin:") and len(r.stderr.strip().splitlines()) == 1, r.stderr[-500:]


@pytest.mark.slow
def test_put_demand_over_rest_answers_422_and_logs_no_traceback(start_api, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    api = start_api()
    body = '{"items": ' + "[" * DEPTH + "]" * DEPTH + "}"
    r = api.call("PUT", "/v1/demand", "scheduler", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text[:500]
    error = r.json()
    assert error["error"].startswith("body:") and "\n" not in error["error"], error
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text
    assert api.get("/v1/demand").json() is None, "nothing was stored"
