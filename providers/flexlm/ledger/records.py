"""Ledger records as JSON documents, for backends that store documents (etcd) rather than rows."""

from __future__ import annotations

from typing import Any

from providers.flexlm.ledger.port import Grant, Return


def grant_doc(g: Grant) -> dict[str, Any]:
    return {"cluster": g.cluster, "token": g.token, "pool": g.pool, "resource": g.resource,
            "requested": g.requested, "granted": g.granted, "count": g.count, "tags": dict(g.tags),
            "created": g.created, "ended": g.ended}


def grant_of(d: dict[str, Any]) -> Grant:
    return Grant(d["cluster"], d["token"], d["pool"], d["resource"], int(d["requested"]), int(d["granted"]),
                 int(d["count"]), dict(d.get("tags") or {}), float(d["created"]),
                 None if d.get("ended") is None else float(d["ended"]))


def return_doc(r: Return) -> dict[str, Any]:
    return {"cluster": r.cluster, "token": r.token, "pool": r.pool, "resource": r.resource, "asked": r.asked,
            "named": None if r.named is None else [list(p) for p in r.named],
            "takes": [list(t) for t in r.takes], "created": r.created}


def return_of(d: dict[str, Any]) -> Return:
    named = None if d.get("named") is None else tuple((str(t), None if n is None else int(n)) for t, n in d["named"])
    return Return(d["cluster"], d["token"], d["pool"], d["resource"], int(d["asked"]), named,
                  tuple((str(t), int(n)) for t, n in d["takes"]), float(d["created"]))
