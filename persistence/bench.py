"""Fact-append throughput, for ``make bench`` (speed is measured here, never asserted in tests)."""

from __future__ import annotations

import time

from lease.port import Lease
from messages.facts import Fact, UsageObserved, make_fact
from persistence.controller import open_controller
from persistence.port import Controller


def bench_append(url: str, n: int, batch: int = 500) -> float:
    """Facts per second appended durably under a lease fence, ``batch`` facts per commit.

    Each batch is one transaction that also checks the fence, as the journal
    writes in production; building the facts is not timed.
    """
    if n <= 0 or batch <= 0:
        raise ValueError(f"bench_append: n and batch must be positive, got n={n}, batch={batch}")
    controller = open_controller(url)
    try:
        lease = acquire_bench_lease(controller, url)
        rate = timed_append(controller, fenced_batches(lease, n, batch))
        controller.leases.release(lease)
    finally:
        controller.close()
    return rate


def acquire_bench_lease(controller: Controller, url: str) -> Lease:
    lease = controller.leases.acquire("bench:append", "bench", ttl=3600.0)
    if lease is None:
        raise RuntimeError(f"bench_append: lease bench:append is held by someone else at {url}")
    return lease


def fenced_batches(lease: Lease, n: int, batch: int) -> list[list[Fact]]:
    """``n`` small facts under ``lease``'s fence, ``batch`` to a list."""
    return [
        [
            make_fact(UsageObserved(resource="bench", in_use=i), provider="bench", lease=lease.name,
                      fence=lease.fence)
            for i in range(start, min(start + batch, n))
        ]
        for start in range(0, n, batch)
    ]


def timed_append(controller: Controller, batches: list[list[Fact]]) -> float:
    """Facts per second appended, one ``append`` per batch; a refusal is an error."""
    started = time.perf_counter()
    for facts in batches:
        result = controller.append(facts)
        if result.refused:
            raise RuntimeError(f"bench_append: refused: {result.refused[0].reason}")
    elapsed = time.perf_counter() - started
    n = sum(len(facts) for facts in batches)
    return n / elapsed if elapsed > 0 else float("inf")
