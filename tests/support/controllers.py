"""Small builders for the contract tests."""

from __future__ import annotations

from lease.port import Lease
from messages.demand import DemandSnapshot, HostItem, UnitItem
from messages.facts import Fact, UsageObserved, make_fact


class FakeClock:
    """The controller clock, moved by hand."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def usage(n: int = 0, *, lease: Lease | None = None, fact_id: str | None = None, provider: str = "p") -> Fact:
    """A fact written under ``lease`` (unfenced when None)."""
    return make_fact(
        UsageObserved(resource="vcs", in_use=n),
        provider=provider,
        lease=lease.name if lease else "",
        fence=lease.fence if lease else 0,
        fact_id=fact_id,
        now=1_700_000_000.0 + n,
    )


def demand(count: int) -> DemandSnapshot:
    return DemandSnapshot(
        items=[
            HostItem(id="d1", count=count, select={"ncpus": ">=8"}),
            UnitItem(id="d2", resource="vcs", count=count * 2),
        ]
    )
