"""A provider's description: what its script says, completed and overridden by config.

The operator's config wins: it is how a site states a negotiated price or a
priority that a generic script cannot know.
"""

from __future__ import annotations

from typing import Any

from config.models import ProviderConfig
from messages.description import ProviderDescription


def merge_description(cfg: ProviderConfig, described: ProviderDescription | None) -> ProviderDescription:
    base: dict[str, Any] = described.model_dump() if described is not None else {"kind": cfg.kind}
    base["name"] = cfg.name
    base["kind"] = cfg.kind
    o = cfg.describe
    simple = {
        "priority": o.priority,
        "lead_time_s": o.lead_time,
        "min_hold_s": o.min_hold,
        "min_request": o.min_request,
        "step": o.step,
        "capacity": o.capacity,
        "region": o.region,
        "zone": o.zone,
    }
    base.update({k: v for k, v in simple.items() if v is not None})
    if isinstance(o.cost_per_hour, (int, float)):
        base["cost_per_hour"] = float(o.cost_per_hour)
    elif isinstance(o.cost_per_hour, dict):
        prices = o.cost_per_hour
        for t in base.get("templates", []):
            if t["id"] in prices:
                t["cost_per_hour"] = prices[t["id"]]
        for pool in base.get("pools", []):
            if pool["resource"] in prices:
                pool["cost_per_unit_hour"] = prices[pool["resource"]]
    return ProviderDescription.model_validate(base)
