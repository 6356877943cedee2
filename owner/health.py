"""Whether the provider serves: its port and its describe calls say, the facts remember, every instance shows it.

Two things degrade a provider: its persistent process cannot start or keeps
dying (the port says so), or its ``describe`` keeps failing (the owner
counts; without a description the planner cannot tell what it offers, and
an operator seeing ``active`` would look elsewhere).
"""

from __future__ import annotations

from collections.abc import Collection

from messages.facts import ProviderHealth
from owner.effects import NOTHING, Effects, Notes, note, write
from owner.settings import OwnerSettings
from policy.retry import backoff
from state.projection import Projection

#: ``describe`` failing this many times in a row degrades the provider, until it succeeds again.
DESCRIBE_FAILURES = 3
#: A description is asked for again after this long, or sooner after a failure (with backoff).
DESCRIBE_EVERY = 3600.0
#: While describe's failures keep a provider degraded, it is asked again at least this often.
DEGRADED_DESCRIBE_EVERY = 60.0


def describe_again(failed: tuple[int, str], ok: bool, reason: str,
                   backoff_max: float) -> tuple[tuple[int, str], float]:
    """describe's failures in a row (and the last reason) after this answer, and how long until it is asked
    again: in an hour, or sooner after a failure, backing off; while the failures keep the provider
    degraded, at least once a minute, so it recovers soon after its describe does."""
    failed = (0, "") if ok else (failed[0] + 1, reason)
    wait = DESCRIBE_EVERY if ok else backoff(failed[0], backoff_max, base=5.0)
    if why_degraded("", *failed):
        wait = min(wait, DEGRADED_DESCRIBE_EVERY)
    return failed, wait


def why_degraded(port: str, describe_failures: int, describe_error: str) -> str:
    """Why the provider is degraded now ("" when it is not): the port's reason first, then describe's."""
    if port:
        return port
    if describe_failures >= DESCRIBE_FAILURES:
        # No count in the reason: a reason that changed at every failure would be a fact at every failure.
        return f"describe keeps failing: {describe_error}"
    return ""


def health(p: Projection, s: OwnerSettings, degraded: str, busy: Collection[object]) -> Effects:
    """Record a change of the port's health: ``degraded`` is why the provider's persistent process cannot
    start or keeps dying, empty when it serves (and always for one-shot providers, so a provider moved
    back to one-shot runs is not left degraded)."""
    if degraded == p.provider(s.name).degraded or Notes("health") in busy:
        return NOTHING
    if degraded:
        return (write(Notes("health"), [ProviderHealth(kind="provider_degraded", reason=degraded)])
                + note("error", f"provider {s.name}: degraded: {degraded}"))
    return (write(Notes("health"), [ProviderHealth(kind="provider_recovered")])
            + note("info", f"provider {s.name}: serves again"))
