"""boto3 and matplotlib are extras (``[ec2]``, ``[sim]``): a daemon runs without them, and each command that
needs one says which to install, in one line, instead of a traceback. Each run blocks the module in a fresh
interpreter (``sys.modules[name] = None`` makes its import fail as if it were not installed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.sim.test_sim_daemon_config import daemon_config, write_trace
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, sim_provider

BLOCK = "import sys\nfor m in {mods!r}: sys.modules[m] = None\n"


def without(mods: tuple[str, ...], code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK.format(mods=mods) + code], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_the_daemon_and_its_cli_load_without_boto3_and_matplotlib(tmp_path):
    r = without(("boto3", "botocore", "matplotlib"),
                "import provisioner.daemon.root, provisioner.api.app, slurm.main\n"
                "from provisioner.cli.main import main\nsys.exit(main(['--version']))", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("provisioner "), r.stderr


def test_the_ec2_provider_without_boto3_names_the_extra_in_one_line(tmp_path):
    (tmp_path / "in.json").write_text("{}")
    r = without(("boto3", "botocore"), "from providers.ec2.main import main\n"
                f"sys.exit(main(['describe', '-f', {str(tmp_path / 'in.json')!r}]))", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout)
    assert r.stderr == ("provisioner-ec2: botocore is not installed: the EC2 provider needs the ec2 extra "
                        "(pip install 'provisioner[ec2]')\n"), r.stderr


def test_sim_without_matplotlib_writes_its_report_then_says_how_to_get_the_plots(tmp_path):
    cfg = daemon_config(tmp_path, [sim_provider(tmp_path, "hosts", HOSTS_SIM),
                                   sim_provider(tmp_path, "units", UNITS_SIM)])
    out = tmp_path / "out"
    r = without(("matplotlib",), "from provisioner.cli.main import main\n"
                f"sys.exit(main(['sim', '--config', {str(cfg)!r}, '--trace', {str(write_trace(tmp_path))!r}, "
                f"'--out', {str(out)!r}]))", cwd=tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "install the sim extra (pip install 'provisioner[sim]') or pass --no-plots" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert json.loads((out / "report.json").read_text())["variants"], "the report is written all the same"
    assert not list(out.glob("*.png"))
