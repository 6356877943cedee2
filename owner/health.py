"""Whether the provider's process serves: its port says, the facts remember, every instance shows it."""

from __future__ import annotations

from collections.abc import Collection

from messages.facts import ProviderHealth
from owner.effects import NOTHING, Effects, Notes, note, write
from owner.settings import OwnerSettings
from persistence.projection import Projection


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
