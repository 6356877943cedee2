"""A request body is bounded while it arrives, before its token is looked at (api.max_body).

A real ``provisioner run`` process serves the API; a client with no token
sends it 256 MiB, once declaring the length and once chunked. Each is
answered 413 without the server ever holding the body: its peak resident
memory (VmHWM in /proc) grows by far less than the body. The margins are
wide on purpose: this is about what is held, not how fast.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest
import yaml

from config.models import ApiConfig
from config.values import parse_size
from tests.support.api import TOKENS, write_tokens
from tests.support.daemons import HOSTS_SIM, STARTUP, free_port, sim_provider, tail, wait_until

MiB = 1024 * 1024
BODY = 256 * MiB
CHUNK = MiB
#: What the server may grow by while refusing a 256 MiB body under the 32 MiB default: the limit, and room.
GROWTH = 128 * MiB


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc")


class Server:
    def __init__(self, tmp: Path, api: dict | None = None) -> None:
        self.port = free_port()
        cfg = {
            "instance": {"id": "a", "serves": ["hosts"], "planner": True},
            "controller": {"url": f"sqlite:///{tmp / 'state.db'}"},
            "api": {"listen": f"127.0.0.1:{self.port}", "tokens": str(write_tokens(tmp / "tokens.yaml")),
                    **(api or {})},
            "lease": {"ttl": "3s", "renew_every": "1s"},
            "providers": [sim_provider(tmp, "hosts", HOSTS_SIM)],
            "home": str(tmp / "home"),
        }
        path = tmp / "provisioner.yaml"
        path.write_text(yaml.safe_dump(cfg))
        self.log = tmp / "daemon.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "provisioner.cli", "--config", str(path), "run"],
                                     stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self.ready, timeout=STARTUP, what="the daemon to serve its API", said=lambda: tail(self.log))

    def ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()[-2000:]
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def server(tmp_path):
    servers: list[Server] = []

    def start(api: dict | None = None) -> Server:
        servers.append(Server(tmp_path, api))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def send(port: int, head: dict[str, str], body: bytes, size: int, chunked: bool,
         token: str | None = None) -> tuple[int, dict, int]:
    """PUT /v1/demand with ``size`` bytes of body, stopping as soon as the server answers.

    Returns the status, the JSON answer and how many body bytes were sent before it came.
    """
    lines = ["PUT /v1/demand HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in head.items()]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sent = 0
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        while sent < size and not select.select([sock], [], [], 0)[0]:
            piece = body[: min(len(body), size - sent)]
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        if chunked and sent >= size:
            sock.sendall(b"0\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    finally:
        sock.close()
    head_text, _, payload = answer.partition(b"\r\n\r\n")
    status = int(head_text.split(b" ", 2)[1])
    return status, orjson.loads(payload[: _length(answer)]) if payload else {}, sent


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def filler(size: int) -> bytes:
    """A chunk of a JSON document that never ends: the server cannot tell it is junk before reading it all."""
    return b'{"items": [' + b" " * (size - 11)


@pytest.mark.slow
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_huge_unauthenticated_body_is_refused_413_without_being_held(server, chunked: bool) -> None:
    s = server()
    before = peak_rss(s.proc.pid)
    status, answer, sent = send(s.port, {}, filler(CHUNK), BODY, chunked)
    grown = peak_rss(s.proc.pid) - before
    assert grown < GROWTH, f"the server's peak memory grew by {grown / MiB:.0f} MiB for a {BODY // MiB} MiB body"
    assert status == 413, (status, answer)
    assert "api.max_body" in answer["error"] and str(32 * MiB) in answer["error"], answer
    assert sent < BODY, "the server answered before the whole body was sent"
    assert s.ready(), "and serves on"
    assert httpx.get(f"http://127.0.0.1:{s.port}/v1/demand", timeout=5,
                     headers={"Authorization": f"Bearer {TOKENS['viewer'][1]}"}).json() is None


@pytest.mark.slow
def test_the_limit_is_configurable_and_a_body_within_it_passes(server) -> None:
    s = server({"max_body": "2KiB"})
    token = TOKENS["scheduler"][1]
    small = orjson.dumps({"items": [{"id": "d1", "kind": "hosts", "count": 1}]})
    status, answer, _ = send(s.port, {}, small, len(small), False, token)
    assert status == 200 and answer["seq"] == 1, answer
    big = orjson.dumps({"items": [{"id": f"item-{n}", "kind": "hosts", "count": 1} for n in range(100)]})
    assert len(big) > 2048
    for chunked in (False, True):
        status, answer, _ = send(s.port, {}, big, len(big), chunked, token)
        assert status == 413, (chunked, status, answer)
    assert "api.max_body" in s.log.read_text(), "each refusal is logged, naming the setting"


def test_sizes_read_as_an_operator_writes_them() -> None:
    assert parse_size("32MiB") == 32 * MiB and parse_size("512KiB") == 512 * 1024 and parse_size("1GB") == 10 ** 9
    assert parse_size(4096) == 4096 and parse_size("4096") == 4096
    assert ApiConfig().max_body == 32 * MiB
    assert ApiConfig.model_validate({"max_body": "8MiB"}).max_body == 8 * MiB
    for bad in ("32 parsecs", "-1", True, "1.5MiB"):
        with pytest.raises(ValueError):
            parse_size(bad)
