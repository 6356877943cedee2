"""The shipped example passes check-config on a fresh machine with --no-file-checks (issue 20, item 10)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "provisioner.yaml"


def test_the_example_config_passes_without_the_file_checks():
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "check-config", "--no-file-checks", str(EXAMPLE)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{EXAMPLE}: OK") and "files not checked" in r.stdout and r.stderr == ""


def test_no_file_checks_still_checks_everything_else(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("idle_time: 10m", "idle_time: 10 minutes", 1))
    assert "idle_time: 10 minutes" in bad.read_text()
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "check-config", "--no-file-checks", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "policy.idle_time: not a duration: '10 minutes'" in r.stderr
    assert "no such file" not in r.stderr
