"""Small simulator configs and traces for the tests, built in code."""

from __future__ import annotations

from typing import Any

import orjson

from sim.config import SimConfig
from sim.engine import Engine
from sim.trace import Trace, parse_trace

#: Fast settings: whole seconds, so a test's trace stays short.
POLICY = {"idle_time": "5m", "cooldown": "2m", "backoff_max": "10m", "request_timeout": "15m",
          "join_grace": "60s", "poll_every": "5s", "plan_every": "5s"}


def hosts(name: str, priority: int = 10, price: float = 1.0, max_number: int = 20, ncpus: int = 8,
          behaviour: dict | None = None, policy: dict | None = None, **desc: Any) -> dict:
    return {"description": {"name": name, "kind": "hosts", "priority": priority, "cost_per_hour": price,
                             "templates": [{"id": f"{name}-t", "max_number": max_number,
                                            "attributes": {"type": "X86_64", "ncpus": ncpus}}], **desc},
            "behaviour": {"lead_time": 60, "call_time": 1, "return_time": 10, **(behaviour or {})},
            **({"policy": policy} if policy else {})}


def units(name: str, resource: str = "vcs", capacity: int = 20, price: float = 2.0, priority: int = 5,
          behaviour: dict | None = None, **desc: Any) -> dict:
    return {"description": {"name": name, "kind": "units", "priority": priority, "cost_per_hour": price,
                             "pools": [{"resource": resource, "capacity": capacity}], **desc},
            "behaviour": {"lead_time": 10, "call_time": 1, "return_time": 5, **(behaviour or {})}}


def config(*providers: dict, resources: list[dict] | None = None, **over: Any) -> SimConfig:
    doc: dict[str, Any] = {"seed": 1, "policy": dict(POLICY), "scheduler": {"join_delay": "10s", "publish_every": 0},
                           "series_every": "1m", "providers": list(providers), "resources": resources or []}
    for key, value in over.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    return SimConfig.model_validate(doc)


def trace(*steps: dict, start: str = "2024-01-01T00:00:00Z") -> Trace:
    lines = [orjson.dumps({"trace": {"start": start}}).decode()] + [orjson.dumps(s).decode() for s in steps]
    return parse_trace(lines, "test.jsonl")


def batch(count: int, item: str = "batch", ncpus: int = 8) -> dict:
    return {"id": item, "kind": "hosts", "count": count, "select": {"ncpus": f">={ncpus}"}}


def simulate(cfg: SimConfig, tr: Trace, **kw: Any) -> tuple[dict, Engine]:
    engine = Engine(cfg, tr, **kw)
    return engine.run(), engine


def orders(engine: Engine) -> list[tuple]:
    """Every order as (seconds from start, provider, action, what, count); ids left out."""
    return [(round(o.at - engine.start, 3), o.provider, o.order.action, o.order.template or o.order.resource,
             o.order.count) for o in engine.p.orders.values()]


def facts_of(engine: Engine, kind: str) -> list:
    return [r for r in engine.p.requests.values() if r.state == kind]
