"""Fixtures for the FlexNet provider: a fake lmutil, settings files, both ledgers, the real executable.

The etcd ledger runs on a real member started as ``tests/etcd`` starts them:
without an etcd binary its tests are skipped on a workstation and fail in CI,
exactly as the etcd controller's own tests are.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.etcd.cluster import Cluster

DATA = Path(__file__).parent / "data"
EXECUTABLE = Path(sys.executable).parent / "provisioner-flexlm"
#: The longest any single provider call may take in these tests.
CALL_TIMEOUT = 20.0

#: lmutil as the provider runs it: ``lmutil lmstat -a -c SPEC``. It logs its arguments and prints the
#: file the test put in place, so a test changes what the license server says by writing that file.
FAKE_LMUTIL = """#!/bin/sh
echo "$*" >> "{log}"
[ "$1" = lmstat ] || exit 2
cat "{output}"
"""


@pytest.fixture(scope="session")
def etcd_member() -> Iterator[Cluster]:
    cluster = Cluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "etcd"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/ledger.db"
    return request.getfixturevalue("etcd_member").url(f"flexlm-{uuid.uuid4().hex[:12]}")


@dataclass
class Result:
    code: int
    out: dict[str, Any] | None
    err: str


@dataclass
class Site:
    """One cluster's provider: its settings file and a way to run the executable as the daemon would."""

    root: Path
    settings: dict[str, Any]

    @property
    def settings_file(self) -> Path:
        return self.root / "flexlm.json"

    def write_settings(self, **changes: Any) -> None:
        self.settings.update(changes)
        self.settings_file.write_text(json.dumps(self.settings))

    def env(self, action: str, doc: dict[str, Any]) -> dict[str, str]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.root), "PROVIDER_NAME": "vcs-pool",
               "PROVIDER_KIND": "units", "PROVISIONER_ACTION": action,
               "FLEXLM_PROVIDER_CONFIG": str(self.settings_file),
               "PROVISIONER_DEADLINE": str(int(time.time() + CALL_TIMEOUT))}
        if "token" in doc:
            env["PROVISIONER_TOKEN"] = doc["token"]
        return env

    def start(self, action: str, doc: dict[str, Any], **env: str) -> subprocess.Popen:
        path = self.root / f"in-{uuid.uuid4().hex}.json"
        path.write_text(json.dumps(doc))
        path.chmod(0o600)
        return subprocess.Popen([str(EXECUTABLE), action, "-f", str(path)], env={**self.env(action, doc), **env},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)

    def run(self, action: str, doc: dict[str, Any] | None = None, **env: str) -> Result:
        return self.finish(self.start(action, doc or {}, **env))

    @staticmethod
    def finish(proc: subprocess.Popen) -> Result:
        try:
            out, err = proc.communicate(timeout=CALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"provisioner-flexlm ran past {CALL_TIMEOUT}s") from None
        return Result(proc.returncode, json.loads(out) if proc.returncode == 0 else None, err.decode())


@pytest.fixture
def lmstat_output(tmp_path: Path) -> Callable[[str], None]:
    """Sets what the fake license server says: a file of ``data/`` by name."""

    def say(name: str) -> None:
        (tmp_path / "lmstat.txt").write_text((DATA / name).read_text())

    say("two_vendors.txt")
    return say


@pytest.fixture
def lmutil(tmp_path: Path, lmstat_output: Callable[[str], None]) -> Path:
    path = tmp_path / "lmutil"
    path.write_text(FAKE_LMUTIL.format(log=tmp_path / "lmutil.log", output=tmp_path / "lmstat.txt"))
    path.chmod(0o755)
    return path


@pytest.fixture
def make_site(tmp_path: Path, lmutil: Path) -> Callable[..., Site]:
    def make(cluster: str = "site-a", hosts: tuple[str, ...] = ("cn*",), ledger: str | None = None,
             pool: int = 40, step: int = 1, **changes: Any) -> Site:
        root = tmp_path / cluster
        root.mkdir(exist_ok=True)
        site = Site(root, {
            "lmutil": str(lmutil), "server": "27000@lic1", "cluster": cluster, "hosts": list(hosts),
            "ledger": ledger or f"sqlite://{tmp_path}/ledger.db",
            "features": [{"feature": "VCSRuntime_Net", "resource": "vcs", "pool": pool, "step": step,
                          "min_hold": "15m"}],
        })
        site.write_settings(**changes)
        return site

    return make
