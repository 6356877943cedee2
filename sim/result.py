"""One simulated run's outcome: which variant, under which config, what it reported, and the engine it ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.config import SimConfig
from sim.engine import Engine


@dataclass(frozen=True)
class Variant:
    name: str
    settings: tuple[str, ...]


@dataclass
class Result:
    variant: Variant
    cfg: SimConfig
    report: dict[str, Any]
    engine: Engine
    #: Trace items no provider of this variant can ever serve (their need is unmet throughout), and why.
    warnings: list[str] = field(default_factory=list)
