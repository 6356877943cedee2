"""Who is who among the daemons sharing a controller, read from the lease table.

Each daemon process holds its instance lease (``instance:<id>``, held by
``<id>@<host>:<pid>/<token>``) for as long as it runs, and the roles it
serves (``planner``, ``provider:<name>``) under its id. So the table tells,
for each instance: whether a process of it is alive, which roles it holds,
and since when. An instance alive with no role stands by for the roles its
config lists. One whose instance lease lapsed stopped renewing without
letting go (killed, frozen, or cut off from the controller); one whose lease
was released stopped cleanly.

A second process started with an instance's id holds no lease while it
waits (``actors.lease``), so it is not listed; its log says it waits. On
etcd, a dead process's records go with its etcd lease about half a second
after they lapse, and the instance is no longer listed; the ``providers`` view
still names, from the facts, an owner that left a provider without letting
go.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from lease.port import INSTANCE, PLANNER, PROVIDER, LeaseRecord

#: A daemon's states, as the view shows them.
STATES = ("active", "standby", "lapsed", "stopped")


class Owner(NamedTuple):
    """Who owns a provider, as the lease table (and the facts, where the table has no record) say."""

    holder: str
    fence: int | None
    #: "held": the lease is current; "lapsed": its holder stopped renewing it and nobody took it since;
    #: "none": nobody holds it (never taken, or given up).
    state: str
    #: Seconds since the lease lapsed; None when it has not, or that is not known.
    lapsed_ago: float | None


def owner(record: LeaseRecord | None, said_owner: str = "", said_fence: int | None = None) -> Owner:
    """The owner of a provider from its lease record and from the facts' last word (``said_owner``: the holder
    of the last ``lease_acquired`` not followed by its ``lease_lost``)."""
    if record is not None and record.held:
        return Owner(record.holder, record.fence, "held", None)
    if record is not None and record.lapsed:
        return Owner(record.holder, record.fence, "lapsed",
                     -record.expires_in if record.expires_in is not None else None)
    if record is None and said_owner:
        # A record gone while the facts name an owner that never said it let go: etcd deleted a dead
        # holder's key with its etcd lease.
        return Owner(said_owner, said_fence, "lapsed", None)
    return Owner("", None, "none", None)


def _process(holder: str) -> str:
    """``host:pid`` of an instance lease's holder (``id@host:pid/token``)."""
    return holder.split("@", 1)[-1].rsplit("/", 1)[0] if "@" in holder else holder


def _since(record: LeaseRecord, now: float) -> float | None:
    """When a record's state began: its grant when held, its lapse when lapsed (epoch seconds)."""
    if record.held:
        return now - record.granted_ago if record.granted_ago is not None else None
    if record.lapsed and record.expires_in is not None:
        return now + record.expires_in
    return None


def daemons(table: list[LeaseRecord], now: float) -> list[dict[str, Any]]:
    """One row per daemon instance: its state, its process, since when, and the roles it holds."""
    instances = {r.name[len(INSTANCE):]: r for r in table if r.name.startswith(INSTANCE)}
    roles: dict[str, list[LeaseRecord]] = {}
    for r in table:
        if r.holder and not r.name.startswith(INSTANCE):
            roles.setdefault(r.holder, []).append(r)
    rows = []
    for ident in sorted(instances.keys() | roles.keys()):
        mine = roles.get(ident, [])
        held = [r for r in mine if r.held]
        record = instances.get(ident)
        if record is None:  # roles without an instance lease: its records went (etcd) or came apart
            state = "active" if held else "lapsed"
        elif record.held:
            state = "active" if held else "standby"
        else:
            state = "lapsed" if record.lapsed else "stopped"
        rows.append({
            "instance": ident,
            "state": state,
            "process": _process(record.holder) if record is not None else "",
            "since": _since(record, now) if record is not None else None,
            "expires_in": record.expires_in if record is not None and record.held else None,
            "planner": any(r.name == PLANNER for r in held),
            "providers": sorted(r.name[len(PROVIDER):] for r in held if r.name.startswith(PROVIDER)),
            "roles": [{"role": r.name, "fence": r.fence, "state": "held" if r.held else "lapsed",
                       "since": _since(r, now)} for r in mine],
        })
    return rows
