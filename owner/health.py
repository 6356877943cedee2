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
from persistence.projection import Projection

#: ``describe`` failing this many times in a row degrades the provider, until it succeeds again.
DESCRIBE_FAILURES = 3


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
