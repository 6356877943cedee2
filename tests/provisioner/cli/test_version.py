"""``provisioner --version``: the installed package's version, as the installed command prints it."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path


def test_version_prints_the_installed_version_and_exits_0():
    installed = version("provisioner")
    assert re.fullmatch(r"\d+\.\d+\.\d+", installed), installed
    command = Path(sys.executable).parent / "provisioner"  # the console script the package installs
    for argv in ([str(command), "--version"], [sys.executable, "-m", "provisioner.cli", "--version"],
                 [sys.executable, "-m", "provisioner", "--version"]):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stdout, r.stderr) == (0, f"provisioner {installed}\n", ""), argv


def test_version_needs_no_config_nor_controller(tmp_path):
    """It answers before anything is read: in an empty folder with a home that does not exist, nothing is created."""
    home = tmp_path / "home"
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "--version"], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PROVISIONER_HOME": str(home)})
    assert r.returncode == 0 and r.stdout.startswith("provisioner "), r.stderr
    assert list(tmp_path.iterdir()) == []
