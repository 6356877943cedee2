"""Serving the REST API from the daemon: uvicorn on its own thread, on a socket bound up front.

Binding before the actors start makes a taken port or a bad address a clear
startup error instead of a thread dying later, and lets ``api.listen`` use
port 0 (tests) with the real port known at once.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

log = logging.getLogger(__name__)


class ApiStartError(Exception):
    """The API cannot serve as configured; the message names the setting."""


def parse_listen(listen: str, setting: str = "api.listen") -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT``."""
    host, _, port = listen.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or int(port) > 65535:
        raise ApiStartError(f"{setting}: expected HOST:PORT (e.g. 127.0.0.1:8787), got {listen!r}")
    return host, int(port)


def bind(listen: str, loopback_only: bool, setting: str = "api.listen") -> socket.socket:
    """The API's socket, bound; ``setting`` names where ``listen`` came from in errors (``--listen``)."""
    host, port = parse_listen(listen, setting)
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ApiStartError(f"{setting} {listen}: cannot resolve {host!r}: {exc.strerror}") from None
    if loopback_only and not ipaddress.ip_address(addr[0].split("%")[0]).is_loopback:
        raise ApiStartError(f"{setting} {listen} is not a loopback address: without api.tokens the API "
                            "serves only this host; set api.tokens to serve beyond it")
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            host = listen.rpartition(":")[0]
            raise ApiStartError(f"{setting} {listen}: the address is in use (another daemon, or a demo, serves "
                                f"there): choose another with `provisioner run --listen {host}:PORT`, or "
                                f"`--listen {host}:0` for any free port (the log says which)") from None
        raise ApiStartError(f"{setting} {listen}: {exc.strerror}") from None
    return sock


class ApiServer:
    def __init__(self, app: Any, listen: str, *, loopback_only: bool, tls: dict[str, Path] | None = None,
                 setting: str = "api.listen") -> None:
        self.sock = bind(listen, loopback_only, setting)
        self.tls = tls
        config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="off", server_header=False,
            timeout_graceful_shutdown=3,
            ssl_certfile=str(tls["cert"]) if tls else None, ssl_keyfile=str(tls["key"]) if tls else None,
        )
        try:
            config.load()  # reads the certificate now, so a bad one fails the start
        except (OSError, ValueError) as exc:
            self.sock.close()
            raise ApiStartError(f"api.tls: cannot load the certificate or key: {exc}") from None
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._serve, name="api", daemon=True)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        host = self.sock.getsockname()[0]
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def _serve(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        except Exception:
            log.exception("api: server stopped on an error")

    def start(self, timeout: float = 10.0) -> "ApiServer":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self.server.started:
            self.stop()
            raise ApiStartError(f"api: the server did not start within {timeout:.0f}s")
        log.info("api: serving %s", self.url)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout=10)
        self.sock.close()
