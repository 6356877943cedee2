"""Real etcd members for tests and benchmarks: private ports, temporary data folders, bounded waits.

Members listen on ports the kernel picked free on their host address (loopback
unless a drill gives them a network namespace), keep their data in a folder
of their own (under /dev/shm when there is one: tests do not measure disks)
and are killed at teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.daemons import free_port

ETCD = shutil.which("etcd")
MISSING = "etcd is not installed (Debian: apt-get install etcd-server; .ci/run installs it)"


def require_etcd() -> str:
    """The etcd binary; without it a test is skipped on a workstation and fails in CI."""
    if ETCD is None:
        if os.environ.get("CI"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return ETCD


@dataclass
class Member:
    name: str
    host: str
    client_port: int
    peer_port: int
    data_dir: Path
    initial_cluster: str
    #: Run the member through this, e.g. ``ip netns exec h1``.
    prefix: list[str] = field(default_factory=list)
    #: A folder from ``tests.support.etcd.certs.make``: clients then need TLS and a certificate of that CA.
    tls: Path | None = None
    proc: subprocess.Popen | None = None

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.client_port}"

    @property
    def log(self) -> Path:
        return self.data_dir.with_suffix(".log")

    def start(self, state: str = "new") -> None:
        argv = [*self.prefix, require_etcd(), "--name", self.name, "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", f"http://{self.host}:{self.peer_port}",
                "--initial-advertise-peer-urls", f"http://{self.host}:{self.peer_port}",
                "--initial-cluster", self.initial_cluster, "--initial-cluster-state", state,
                "--initial-cluster-token", "provisioner-test", "--log-level", "warn",
                # A member coming back from a partition must not depose a working leader.
                "--pre-vote"]
        if self.tls:
            argv += ["--cert-file", str(self.tls / "server.pem"), "--key-file", str(self.tls / "server.key"),
                     "--trusted-ca-file", str(self.tls / "ca.pem"), "--client-cert-auth"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def status(self) -> dict:
        """The member's own view: its id (``header.member_id``) and the ``leader``'s."""
        ask = urllib.request.Request(f"{self.client_url}/v3/maintenance/status", data=b"{}", method="POST")
        with urllib.request.urlopen(ask, timeout=2, context=self._context()) as reply:
            return json.loads(reply.read())

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=0.5, context=self._context()) as reply:
                return b'"true"' in reply.read()
        except OSError:
            return False

    def _context(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        context = ssl.create_default_context(cafile=str(self.tls / "ca.pem"))
        context.load_cert_chain(str(self.tls / "client.pem"), str(self.tls / "client.key"))
        return context

    def wait_healthy(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"etcd member {self.name} exited {self.proc.returncode}: {self._tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd member {self.name} not healthy after {timeout}s: {self._tail()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def _tail(self) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-5:])
        except OSError:
            return "(no log)"


class Cluster:
    """``size`` members on ``hosts`` (loopback by default), started together."""

    def __init__(self, root: Path | None = None, size: int = 1, hosts: list[str] | None = None,
                 prefixes: list[list[str]] | None = None, tls: Path | None = None) -> None:
        shm = Path("/dev/shm")
        self.root = Path(tempfile.mkdtemp(prefix="etcd-", dir=root or (shm if shm.is_dir() else None)))
        hosts = hosts or ["127.0.0.1"] * size
        ports = [(free_port() if h.startswith("127.") else 2379, free_port() if h.startswith("127.") else 2380)
                 for h in hosts]
        initial = ",".join(f"m{i}=http://{h}:{p[1]}" for i, (h, p) in enumerate(zip(hosts, ports)))
        self.members = [
            Member(f"m{i}", h, p[0], p[1], self.root / f"m{i}", initial, (prefixes or [[]] * size)[i], tls)
            for i, (h, p) in enumerate(zip(hosts, ports))
        ]

    def start(self) -> Cluster:
        try:
            for m in self.members:
                m.start()
            for m in self.members:
                m.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def leader(self) -> Member:
        for m in self.members:
            if m.proc is not None and m.healthy():
                status = m.status()
                break
        else:
            raise RuntimeError("no healthy etcd member to ask for the leader")
        for m in self.members:
            if m.proc is not None and m.status()["header"]["member_id"] == status["leader"]:
                return m
        raise RuntimeError(f"etcd leader {status['leader']} is not a running member")

    def move_leader(self, to: Member) -> None:
        """Hand etcd's leadership to ``to`` (asked of the current leader), and wait until it holds it."""
        leader = self.leader()
        if leader is not to:
            target = to.status()["header"]["member_id"]
            ask = urllib.request.Request(f"{leader.client_url}/v3/maintenance/transfer-leadership",
                                         data=json.dumps({"targetID": target}).encode(), method="POST")
            with urllib.request.urlopen(ask, timeout=10, context=leader._context()):
                pass
        deadline = time.monotonic() + 10
        while self.leader() is not to:
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd leadership did not move to {to.name}")
            time.sleep(0.05)

    def url(self, namespace: str, members: list[Member] | None = None) -> str:
        hosts = ",".join(f"{m.host}:{m.client_port}" for m in members or self.members)
        return f"etcd://{hosts}/{namespace}"

    def stop(self) -> None:
        for m in self.members:
            m.kill()
        shutil.rmtree(self.root, ignore_errors=True)
