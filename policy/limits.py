"""What an operator allows per provider, beyond what the provider says of itself.

Plain data for the pure functions; the daemon builds it from the config
(``providers[].policy``). The per-provider count cap is the description's
``capacity``, which the config may override.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The billed unit assumed by a billing-boundary return when the provider bills per second.
HOUR = 3600.0


@dataclass(frozen=True)
class ProviderLimits:
    #: Ceiling on the cost per hour of everything held from this provider at once.
    max_cost_per_hour: float | None = None
    #: At most ``rate_count`` new hosts or units ordered per ``rate_per`` seconds.
    rate_count: int | None = None
    rate_per: float = 60.0
    #: Seconds per billed unit (3600 for hourly billing); 0 bills per second.
    billing_unit: float = 0.0
    #: Give idle hosts back only this close to the end of a billed unit; None: whenever idle.
    return_window: float | None = None
    #: Hosts held this long are given back as soon as they are idle.
    max_lifetime: float | None = None

    def charge_hours(self, min_hold: float) -> float:
        """Hours a new host or unit is paid for at least: its minimum hold or one billed unit."""
        return max(min_hold, self.billing_unit) / 3600.0


UNLIMITED = ProviderLimits()
