"""One call to the simulator, read from a v2 input document and checked before anything changes.

Input errors exit 65 (bad data) naming the action and the field: they are
the caller's mistake, not the provider's configuration or capacity.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from simprov_config import SimConfig
from simprov_exit import BAD_INPUT, SimExit


class Call(NamedTuple):
    action: str
    #: The idempotency token; None means every call is new (LSF callers without one).
    token: Optional[str] = None
    #: Template id (hosts) or resource name (units).
    what: Optional[str] = None
    count: Optional[int] = None
    tags: Optional[Dict[str, str]] = None
    machines: Optional[List[Dict[str, str]]] = None
    grants: Optional[List[Tuple[str, Optional[int]]]] = None
    request_ids: Tuple[str, ...] = ()
    #: A request's host names, one per host (a scheduler's named nodes); empty: the provider names them.
    names: Tuple[str, ...] = ()
    #: Answer in LSF shapes (getReturnRequests also reports unlisted machines).
    lsf: bool = False


def bad(action: str, where: str, problem: str) -> SimExit:
    return SimExit(BAD_INPUT, f"{action} input: {where}: {problem}")


def text(doc: Dict[str, Any], key: str, action: str, where: Optional[str] = None) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise bad(action, where or key, f"must be a non-empty string, found {value!r}")
    return value


def count(doc: Dict[str, Any], key: str, action: str, where: Optional[str] = None) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad(action, where or key, f"must be an integer >= 1, found {value!r}")
    return value


def machines(doc: Dict[str, Any], action: str) -> List[Dict[str, str]]:
    items = doc.get("machines")
    if not isinstance(items, list):
        raise bad(action, "machines", "must be a list of {name, machineId}")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad(action, f"machines[{i}]", "must be an object with name and/or machineId")
        name, machine_id = item.get("name") or "", item.get("machineId") or ""
        if not isinstance(name, str) or not isinstance(machine_id, str) or not (name or machine_id):
            raise bad(action, f"machines[{i}]", "needs a string name or machineId")
        out.append({"name": name, "machineId": machine_id})
    return out


def _token(doc: Dict[str, Any], action: str, env_token: Optional[str]) -> str:
    if doc.get("token") is None and env_token:
        return env_token
    return text(doc, "token", action)


def _tags(doc: Dict[str, Any], action: str) -> Dict[str, str]:
    tags = doc.get("tags") or {}
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise bad(action, "tags", f"must be an object of strings, found {tags!r}")
    return dict(tags)


def _grants(doc: Dict[str, Any], action: str) -> Optional[List[Tuple[str, Optional[int]]]]:
    items = doc.get("grants")
    if items is None:
        return None
    if not isinstance(items, list):
        raise bad(action, "grants", "must be a list of request ids or {request_id, count}")
    out: List[Tuple[str, Optional[int]]] = []
    for i, item in enumerate(items):
        where = f"grants[{i}]"
        if isinstance(item, str) and item:
            out.append((item, None))
            continue
        if not isinstance(item, dict):
            raise bad(action, where, "must be a request id or {request_id, count}")
        ref = item.get("request_id") or item.get("requestId") or item.get("token")
        if not isinstance(ref, str) or not ref:
            raise bad(action, where, "needs request_id (or requestId, token)")
        out.append((ref, count(item, "count", action, f"{where}.count") if "count" in item else None))
    return out


def request_ids(doc: Dict[str, Any], action: str) -> List[str]:
    items = doc.get("requests")
    if not isinstance(items, list):
        raise bad(action, "requests", "must be a list of {requestId}")
    ids = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad(action, f"requests[{i}]", "must be an object with requestId")
        ids.append(text(item, "requestId", action, f"requests[{i}].requestId"))
    return ids


def _served(cfg: SimConfig, doc: Dict[str, Any], action: str) -> str:
    """The template (hosts) or resource (units) the call names; a call for the other kind is refused."""
    key = "template" if cfg.kind == "hosts" else "resource"
    other = "resource" if cfg.kind == "hosts" else "template"
    if other in doc and key not in doc:
        raise bad(action, other, f"this provider lends {cfg.kind}; give '{key}' instead")
    return text(doc, key, action)


def _names(doc: Dict[str, Any], action: str, n: int) -> Tuple[str, ...]:
    value = doc.get("names")
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) != n or not all(isinstance(x, str) and x for x in value) \
            or len(set(value)) != n:
        raise bad(action, "names", f"must be {n} distinct non-empty names, one per host, found {value!r}")
    return tuple(value)


def parse_v2(action: str, doc: Dict[str, Any], cfg: SimConfig, env_token: Optional[str]) -> Call:
    if action == "describe":
        return Call(action)
    if action == "request":
        n = count(doc, "count", action)
        return Call(action, token=_token(doc, action, env_token), what=_served(cfg, doc, action),
                    count=n, tags=_tags(doc, action), names=_names(doc, action, n))
    if action == "status":
        return Call(action, request_ids=tuple(request_ids(doc, action)))
    if action == "return":
        token = _token(doc, action, env_token)
        if cfg.kind == "hosts":
            return Call(action, token=token, machines=machines(doc, action))
        grants = _grants(doc, action)
        if grants is None and "count" not in doc:
            raise bad(action, "count", "give a count, grants, or both")
        return Call(action, token=token, what=_served(cfg, doc, action), grants=grants,
                    count=count(doc, "count", action) if "count" in doc else None)
    if action == "list":
        return Call(action, tags=_tags(doc, action))
    if action == "reclaims":
        return Call(action, machines=machines(doc, action) if doc.get("machines") is not None else None)
    if action == "usage":
        if cfg.kind != "units":
            raise bad(action, "resource", "usage is for units providers; this one lends hosts")
        resource = text(doc, "resource", action)
        if cfg.pool(resource) is None:
            raise bad(action, "resource", f"no pool {resource!r} (pools: {', '.join(p.resource for p in cfg.pools)})")
        return Call(action, what=resource)
    raise AssertionError(f"unhandled action {action}")
