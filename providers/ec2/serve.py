"""``provisioner-ec2 serve``: the EC2 provider in persistent mode (protocol version 1, JSON lines).

The actions are the functions one-shot runs call (``actions.py``); what a
long-running process adds is one boto3 client per region, made once and
kept, so a status poll no longer pays for an interpreter, the SDK and a TLS
handshake. The settings file is read for every call, as one-shot runs read
it, so a change takes effect at once; the credentials are the environment's,
and when the env_file changes the daemon starts a new process.

A kept client's socket timeout cannot follow each call's deadline: a call
still retries only while its deadline leaves room (``Clients.left``), and
one slow answer from EC2 past the deadline is what the daemon treats as an
unknown outcome anyway.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any, Callable

from providers.ec2.actions import ACTIONS
from providers.ec2.clients import Clients, ec2_client
from providers.ec2.errors import FAILED, ProviderError, describe, exit_code, scrub
from providers.serving import serve as serve_calls


class Server:
    """The clients one process keeps, and how each call is answered with them."""

    def __init__(self, env: Any, log: Callable[[str], None]) -> None:
        self.env = env
        self.log = log
        self.lock = threading.Lock()
        self.clients: dict[str, Any] = {}

    def client(self, region: str, service: str = "ec2") -> Any:
        """The region's client of ``service``, made on its first use: clients are thread-safe, making one
        is not."""
        with self.lock:
            key = f"{service}/{region}"
            if key not in self.clients:
                self.clients[key] = ec2_client(region, service=service)
            return self.clients[key]

    def handle(self, action: str, doc: dict[str, Any], deadline: float | None) -> dict[str, Any]:
        from providers.ec2 import settings as settings_file

        try:
            settings = settings_file.load(self.env)
            clients = Clients(ec2=self.client(settings.region), deadline=deadline, log=self.log,
                              quotas=self.client(settings.region, "service-quotas"))
            return {"exit": 0, "output": ACTIONS[action](settings, clients, doc)}
        except Exception as exc:  # every failure is one call's answer; the process serves on
            code = exit_code(exc)
            if code == FAILED and not isinstance(exc, ProviderError):
                for line in traceback.format_exc().splitlines()[:-1]:
                    self.log(scrub(line, self.env))
            return {"exit": code, "message": f"{action}: {describe(exc)}"}


def serve(env: Any, log: Callable[[str], None]) -> int:
    """Serve calls until the daemon closes stdin."""
    return serve_calls(Server(env, log).handle, list(ACTIONS), log=log)
