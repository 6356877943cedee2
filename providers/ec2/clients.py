"""The EC2 client the actions use, with the time limits and retries the contract asks for.

botocore's own retries are turned off: its standard mode retries every HTTP
500, and EC2 answers ``InsufficientInstanceCapacity`` with a 500, so a
capacity shortage would cost several backed-off RunInstances in one zone
before the next zone is even tried. Instead ``Clients.call`` retries what is
really transient (throttling, 5xx other than capacity, network) a couple of
times, within the daemon's deadline; past that the action exits 75 and the
daemon retries after its own backoff.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from providers.ec2.errors import TRANSIENT, exit_code

#: Attempts of one AWS call before the action gives up with exit 75.
ATTEMPTS = 3
#: First pause between attempts; it doubles, with jitter.
BACKOFF_S = 0.2
#: Seconds kept free before the daemon's deadline, to print an answer.
MARGIN_S = 2.0


@dataclass
class Clients:
    """What an action needs from outside: EC2 (and Service Quotas, where reachable), a clock and a way to wait.

    A long-running server would build one of these and keep it; a test can
    give a fake clock. ``deadline`` is when the daemon kills the script (epoch
    seconds), or None when run by hand.
    """

    ec2: Any
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    deadline: float | None = None
    attempts: int = ATTEMPTS
    log: Callable[[str], None] = field(default=lambda _msg: None)
    #: A Service Quotas client (``describe`` reads the vCPU quota with it); None: no quota is read.
    quotas: Any = None

    def left(self) -> float:
        """Seconds left before the deadline, less a margin to answer; infinite without one."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - MARGIN_S - self.clock()

    def call(self, operation: str, **params: Any) -> Any:
        """One EC2 API call, retried while the error is transient and time is left."""
        method = getattr(self.ec2, operation)
        pause = BACKOFF_S
        for attempt in range(1, self.attempts + 1):
            try:
                return method(**params)
            except Exception as exc:
                if exit_code(exc) != TRANSIENT or attempt == self.attempts or self.left() < pause * 2:
                    raise
                self.log(f"{operation}: transient error, attempt {attempt} of {self.attempts}")
                self.sleep(pause * (1 + random.random()))
                pause *= 2
        raise AssertionError("unreachable")

    def pages(self, operation: str, key: str, **params: Any) -> list[Any]:
        """Every item under ``key`` of a paginated call; each page is retried on its own."""
        items: list[Any] = []
        token: str | None = None
        while True:
            page = self.call(operation, **params, **({"NextToken": token} if token else {}))
            items.extend(page.get(key, []))
            token = page.get("NextToken")
            if not token:
                return items


def deadline_from(env: Any) -> float | None:
    raw = env.get("PROVISIONER_DEADLINE", "")
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


#: The longest wait for one answer from EC2.
READ_TIMEOUT_S = 30.0


def connect(region: str, env: Any = None, log: Callable[[str], None] | None = None) -> Clients:
    """A client for ``region``; credentials, profile and ``AWS_ENDPOINT_URL`` come from the environment."""
    env = os.environ if env is None else env
    deadline = deadline_from(env)
    read_timeout = READ_TIMEOUT_S
    if deadline is not None:
        read_timeout = max(2.0, min(read_timeout, deadline - MARGIN_S - time.time()))
    return Clients(ec2=ec2_client(region, read_timeout), deadline=deadline, log=log or (lambda _msg: None),
                   quotas=ec2_client(region, read_timeout, service="service-quotas"))


def ec2_client(region: str, read_timeout: float = READ_TIMEOUT_S, service: str = "ec2") -> Any:
    """A boto3 EC2 client (or another ``service``'s) with botocore's retries off (``Clients.call`` retries
    what is transient).

    boto3 is imported here, not at the top: ``--help`` and a bad settings file
    answer without paying for it.
    """
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=min(5.0, read_timeout),
        read_timeout=read_timeout,
        user_agent_extra="provisioner-ec2",
    )
    return boto3.session.Session().client(service, region_name=region, config=config)
