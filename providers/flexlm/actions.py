"""The v2 actions, each a plain function of (settings, ledger, lmstat reader, input document) to an answer.

Nothing here opens a file, starts a process or reads the environment: the
entry point builds those and hands them in, so a long-running mode can keep
one ledger connection and reuse these unchanged, and tests can drive them
directly. What needs the license server reads it once, before the ledger's
atomic step; what only concerns the ledger (status, list, return, a repeated
token) never waits on the license server, so units can be given back while
it is down.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import reduce
from typing import Any

from providers.flexlm import counting, documents, drill, lmstat
from providers.flexlm.errors import PoolExhausted
from providers.flexlm.ledger import rules
from providers.flexlm.ledger.port import BorrowAsk, Grant, Ledger, PoolView, Return, ReturnAsk
from providers.flexlm.lmutil import LmstatReader
from providers.flexlm.settings import Settings

Doc = dict[str, Any]
#: An action that reads the license server only, and one that needs the pool's ledger too.
Action = Callable[[Settings, "Ledger | None", LmstatReader, Doc], Doc]
LedgerAction = Callable[[Settings, Ledger, LmstatReader, Doc], Doc]


def describe(settings: Settings, ledger: Ledger | None, read: LmstatReader, doc: Doc) -> Doc:
    """One pool per feature. The description has one step and one minimum hold for the whole provider, so
    with several features they are the least common multiple of the steps and the longest hold: no grant
    breaks a feature's step, and none is given back before its feature's hold."""
    step = reduce(math.lcm, (f.step for f in settings.features), 1)
    return {
        "kind": "units",
        "min_request": step,
        "step": step,
        "min_hold_s": max(f.min_hold for f in settings.features),
        "pools": [{"resource": f.resource, "capacity": f.pool} for f in settings.features],
    }


def usage(settings: Settings, ledger: Ledger | None, read: LmstatReader, doc: Doc) -> Doc:
    """Tokens checked out by this cluster's hosts, whoever lent them, and the pool they may borrow from."""
    ask = documents.read(documents.UsageIn, doc, "usage")
    feature = settings.feature(ask.resource)
    found = counting.feature_usage(lmstat.parse(read(settings.license_spec)), feature, settings.license_spec)
    return {"resource": ask.resource, "in_use": counting.held_by(found, settings.hosts), "total": feature.pool}


def request(settings: Settings, ledger: Ledger, read: LmstatReader, doc: Doc) -> Doc:
    ask = documents.read(documents.RequestIn, doc, "request")
    feature = settings.feature(ask.resource)
    borrow = BorrowAsk(settings.cluster, ask.token, feature.pool_key, ask.resource, ask.count,
                       tuple(settings.hosts), ask.tags)
    known = ledger.grant(settings.cluster, ask.token)
    if known is not None:
        return _accepted(rules.same_borrow(known, borrow), feature.pool)
    found = counting.feature_usage(lmstat.parse(read(settings.license_spec)), feature, settings.license_spec)

    def size(view: PoolView) -> int:
        clusters = {**view.hosts, settings.cluster: tuple(settings.hosts)}
        outside = counting.held_outside(found, clusters.values())
        n = rules.grant_size(ask.count, rules.room(feature.pool, found.issued - outside, view), feature.step)
        if n == 0:
            raise PoolExhausted(
                f"pool {feature.pool_key} has no room for {ask.count} (step {feature.step}): {view.lent} of "
                f"{feature.pool} lent to clusters; {outside} of {found.issued} issued held outside them")
        return n

    grant = ledger.borrow(borrow, size)
    drill.pause("borrow:after")
    return _accepted(grant, feature.pool)


def give_back(settings: Settings, ledger: Ledger, read: LmstatReader, doc: Doc) -> Doc:
    ask = documents.read(documents.ReturnIn, doc, "return")
    feature = settings.feature(ask.resource)
    ret = ledger.give_back(ReturnAsk(settings.cluster, ask.token, feature.pool_key, ask.resource, ask.count,
                                     ask.named))
    return {"requestId": ret.request_id, "message": _returned(ret)}


def status(settings: Settings, ledger: Ledger, read: LmstatReader, doc: Doc) -> Doc:
    """Grants are whole once written and returns are done once written: nothing here is ever ``running``."""
    ask = documents.read(documents.StatusIn, doc, "status")
    out = []
    for ref in ask.requests:
        rid = ref.request_id
        kind, _, token = rid.partition("-")
        answer: Doc = {"requestId": rid, "machines": []}
        grant = ledger.grant(settings.cluster, token) if kind == "g" and token else None
        ret = ledger.returned(settings.cluster, token) if kind == "r" and token else None
        if grant is not None:
            full = grant.granted == grant.requested
            answer.update(status="complete" if full else "complete_with_error", granted=grant.count,
                          message="" if full else f"granted {grant.granted} of {grant.requested}: the pool was full")
        elif ret is not None:
            done = ret.returned == ret.asked
            answer.update(status="complete" if done else "complete_with_error", message=_returned(ret))
        else:
            answer.update(status="complete_with_error", message="unknown request")
        out.append(answer)
    return {"requests": out}


def holdings(settings: Settings, ledger: Ledger, read: LmstatReader, doc: Doc) -> Doc:
    """This cluster's grants that hold units, as the ledger has them: what the daemon's orphan search compares."""
    tags = documents.read(documents.ListIn, doc, "list").tags
    grants = [g for g in ledger.grants(settings.cluster) if all(g.tags.get(k) == v for k, v in tags.items())]
    return {"machines": [], "grants": [
        {"token": g.token, "requestId": g.request_id, "resource": g.resource, "count": g.count} for g in grants]}


def reclaims(settings: Settings, ledger: Ledger | None, read: LmstatReader, doc: Doc) -> Doc:
    """A license server never takes a token back from a running job: there is nothing to report."""
    return {"requests": []}


def _accepted(grant: Grant, pool: int) -> Doc:
    return {"requestId": grant.request_id,
            "message": f"granted {grant.granted} of {grant.requested} {grant.resource} (pool {grant.pool} of {pool})"}


def _returned(ret: Return) -> str:
    if ret.returned == ret.asked:
        return f"returned {ret.returned} {ret.resource}"
    return f"returned {ret.returned} of {ret.asked} {ret.resource}: the named grants hold no more"


#: Actions that never open the ledger.
PLAIN_ACTIONS: dict[str, Action] = {"describe": describe, "usage": usage, "reclaims": reclaims}
#: Actions that read or write the ledger.
LEDGER_ACTIONS: dict[str, LedgerAction] = {"request": request, "return": give_back, "status": status, "list": holdings}
#: Every action's name, in the order the usage line gives them.
ACTIONS = ("describe", "usage", "request", "return", "status", "list", "reclaims")
