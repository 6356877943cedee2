"""Hosts as network namespaces on one bridge, with links that can be cut.

Each host is a namespace with one veth link (``eth0``) to a bridge that lives
in a namespace of its own; the test process joins the bridge too, so it can
watch the controller from outside. Cutting a host downs its port on the
bridge: its packets are dropped silently, as on a failed switch port, so its
peers see timeouts rather than refusals. Everything is torn down with the
namespaces. Needs root and iproute2.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None if they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2 (the ip command)"
    probe = f"pvprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Network:
    """``size`` hosts at 10.213.N.1..size on a bridge; this process is 10.213.N.254."""

    def __init__(self, size: int) -> None:
        self.tag = f"pv{random.randrange(16 ** 4):04x}"
        # A subnet of our own, unlikely to meet another run's on the same machine.
        self.subnet = f"10.213.{random.randrange(1, 250)}"
        self.switch = f"{self.tag}sw"
        self.hosts = [f"{self.tag}h{i}" for i in range(1, size + 1)]
        self.addresses = [f"{self.subnet}.{i}" for i in range(1, size + 1)]
        self.uplink = f"{self.tag}up"
        self._made: list[str] = []

    def create(self) -> Network:
        try:
            self._netns(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for host, address in zip(self.hosts, self.addresses):
                self._netns(host)
                _ip("link", "add", f"{host}a", "type", "veth", "peer", "name", f"{host}b")
                _ip("link", "set", f"{host}a", "netns", host)
                _ip("-n", host, "link", "set", f"{host}a", "name", "eth0")
                _ip("-n", host, "addr", "add", f"{address}/24", "dev", "eth0")
                _ip("-n", host, "link", "set", "eth0", "up")
                self._port(f"{host}b")
            _ip("link", "add", self.uplink, "type", "veth", "peer", "name", f"{self.uplink}b")
            self._port(f"{self.uplink}b")
            _ip("addr", "add", f"{self.subnet}.254/24", "dev", self.uplink)
            _ip("link", "set", self.uplink, "up")
        except BaseException:
            self.destroy()
            raise
        return self

    def _netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _port(self, veth: str) -> None:
        """Move a veth end onto the bridge."""
        _ip("link", "set", veth, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", veth, "master", "br0")
        _ip("-n", self.switch, "link", "set", veth, "up")

    def run_in(self, index: int) -> list[str]:
        """The argv prefix that runs a command on host ``index``."""
        return ["ip", "netns", "exec", self.hosts[index]]

    def cut(self, index: int) -> None:
        _ip("-n", self.switch, "link", "set", f"{self.hosts[index]}b", "down")

    def restore(self, index: int) -> None:
        _ip("-n", self.switch, "link", "set", f"{self.hosts[index]}b", "up")

    def destroy(self) -> None:
        """Remove every namespace made (their links go with them); kill what runs inside first."""
        subprocess.run(["ip", "link", "del", self.uplink], capture_output=True, check=False)
        for name in reversed(self._made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        self._made = []
