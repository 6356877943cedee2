"""Admin commands for tests and demos: look inside the simulator and push it around.

They are not part of the provider contract: no fault injection applies and
they answer on stdout as JSON so scripts can check the result.
"""

from __future__ import annotations

from typing import Any, Dict, List

import simprov_hosts as hosts
from simprov_config import SimConfig
from simprov_exit import BAD_INPUT, SimExit

State = Dict[str, Any]


def reclaim(state: State, now: float, ref: str) -> Dict[str, Any]:
    """Take a machine back as a spot reclaim would, now."""
    m = hosts.find(state, ref, ref)
    if m is None:
        raise SimExit(BAD_INPUT, f"admin reclaim: no machine {ref!r} (give a machineId or name)")
    if m["state"] not in hosts.LIVE:
        raise SimExit(BAD_INPUT, f"admin reclaim: machine {m['machineId']} is already {m['state']}")
    hosts.reclaim(state, m, now)
    return {"machineId": m["machineId"], "name": m["name"], "state": m["state"]}


def set_in_use(cfg: SimConfig, state: State, args: List[str]) -> Dict[str, Any]:
    """Set what the license server reports as checked out by jobs."""
    resource, amount = args
    if cfg.pool(resource) is None:
        pools = ", ".join(p.resource for p in cfg.pools)
        raise SimExit(BAD_INPUT, f"admin set-in-use: no pool {resource!r} (pools: {pools})")
    if not amount.isdigit():
        raise SimExit(BAD_INPUT, f"admin set-in-use: amount must be an integer >= 0, found {amount!r}")
    state["in_use"][resource] = int(amount)
    return {"resource": resource, "in_use": int(amount)}
