"""The pool ledger in etcd, for clusters at several sites: every change is a compare-and-swap on the pool's key.

Keys under ``/PREFIX/``:

- ``pools/POOL``: what each cluster has borrowed and its host globs. Every
  change of the pool's grants rewrites this key, in the same transaction, and
  only if its ``mod_revision`` is still the one read: so two clusters cannot
  both decide on the same total; the loser reads again and decides anew.
- ``grants/CLUSTER/TOKEN``: a grant that still holds units; ``list`` reads
  these only.
- ``ended/CLUSTER/TOKEN`` and ``returns/CLUSTER/TOKEN``: grants given back
  in full, and returns. They exist so that a repeated token finds its first
  call, and carry an etcd lease of ``RETENTION_S``: etcd forgets them after.

Reads that a decision is made on are one transaction of range requests, so
they see one revision. A call that gets no answer in time goes to the next
endpoint; as every write is guarded by a compare, trying it again after an
unknown outcome cannot apply it twice.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from etcd3gw.client import Etcd3Client
from etcd3gw.exceptions import ConnectionFailedError, ConnectionTimeoutError, Etcd3Exception, InternalServerError

from providers.flexlm import drill
from providers.flexlm.errors import Transient
from providers.flexlm.ledger import EtcdLocation, records, rules
from providers.flexlm.ledger.port import BorrowAsk, Grant, PoolView, Return, ReturnAsk, Sizer

#: How many times a write is decided again after losing a compare-and-swap, before the call gives up (75).
ATTEMPTS = 50


class EtcdLedger:
    def __init__(self, where: EtcdLocation) -> None:
        self.where = where
        self.root = f"/{where.prefix}/"
        self.clients = [Etcd3Client(h, p, timeout=where.timeout, api_path="/v3/") for h, p in where.endpoints]

    def close(self) -> None:
        for c in self.clients:
            c.session.close()

    # --- writes ----------------------------------------------------------------

    def borrow(self, ask: BorrowAsk, size: Sizer) -> Grant:
        grant_key = self._key("grants", ask.cluster, ask.token)
        pool_key = self._key("pools", ask.pool)
        for _ in range(ATTEMPTS):
            live, ended, pool = self._one(self._read([grant_key, self._key("ended", ask.cluster, ask.token), pool_key]))
            if (found := live or ended) is not None:
                return rules.same_borrow(records.grant_of(_doc(found)), ask)
            view = _view(ask.pool, pool)
            n = size(view)
            grant = Grant(ask.cluster, ask.token, ask.pool, ask.resource, ask.count, n, n, dict(ask.tags), time.time())
            held = {**view.held, ask.cluster: view.held.get(ask.cluster, 0) + n}
            hosts = {**view.hosts, ask.cluster: ask.hosts}
            drill.pause("borrow:mid")
            if self._swap(pool_key, pool, [_absent(grant_key)],
                          [_put(pool_key, _pool_doc(held, hosts)), _put(grant_key, records.grant_doc(grant))]):
                return grant
            _back_off()
        raise Transient(f"ledger {self.where.shown}: pool {ask.pool} changed under {ATTEMPTS} attempts in a row")

    def give_back(self, ask: ReturnAsk) -> Return:
        return_key = self._key("returns", ask.cluster, ask.token)
        pool_key = self._key("pools", ask.pool)
        lease: str | None = None
        for _ in range(ATTEMPTS):
            grants_prefix = self._key("grants", ask.cluster, "")
            existing, pools, held_kvs = self._read([return_key, pool_key, (grants_prefix, _prefix_end(grants_prefix))])
            if existing:
                return rules.same_return(records.return_of(_doc(existing[0])), ask)
            pool = pools[0] if pools else None
            live = [g for g in map(records.grant_of, map(_doc, held_kvs)) if g.pool == ask.pool and g.count > 0]
            now = time.time()
            takes = rules.plan_return(live, ask)
            view = _view(ask.pool, pool)
            held = {**view.held, ask.cluster: view.held.get(ask.cluster, 0) - sum(n for _, n in takes)}
            ret = Return(ask.cluster, ask.token, ask.pool, ask.resource, ask.count, ask.named, tuple(takes), now)
            lease = lease or self._lease()
            ops = [_put(pool_key, _pool_doc({c: n for c, n in held.items() if n > 0}, view.hosts)),
                   _put(return_key, records.return_doc(ret), lease)]
            for g in rules.apply_takes(live, takes, now):
                if g.count:
                    ops.append(_put(self._key("grants", g.cluster, g.token), records.grant_doc(g)))
                else:
                    ops.append(_delete(self._key("grants", g.cluster, g.token)))
                    ops.append(_put(self._key("ended", g.cluster, g.token), records.grant_doc(g), lease))
            drill.pause("return:mid")
            if self._swap(pool_key, pool, [_absent(return_key)], ops):
                return ret
            _back_off()
        raise Transient(f"ledger {self.where.shown}: pool {ask.pool} changed under {ATTEMPTS} attempts in a row")

    # --- reads -----------------------------------------------------------------

    def grant(self, cluster: str, token: str) -> Grant | None:
        live, ended = self._one(self._read([self._key("grants", cluster, token), self._key("ended", cluster, token)]))
        kv = live or ended
        return records.grant_of(_doc(kv)) if kv else None

    def returned(self, cluster: str, token: str) -> Return | None:
        (kv,) = self._one(self._read([self._key("returns", cluster, token)]))
        return records.return_of(_doc(kv)) if kv else None

    def grants(self, cluster: str) -> list[Grant]:
        prefix = self._key("grants", cluster, "")
        (kvs,) = self._read([(prefix, _prefix_end(prefix))])
        found = [records.grant_of(_doc(kv)) for kv in kvs]
        return sorted((g for g in found if g.count > 0), key=lambda g: (g.created, g.token))

    # --- etcd ------------------------------------------------------------------

    def _key(self, kind: str, *parts: str) -> bytes:
        return (self.root + kind + "/" + "/".join(quote(p, safe="") for p in parts)).encode("ascii")

    def _read(self, ranges: list[bytes | tuple[bytes, bytes]]) -> list[list[dict[str, Any]]]:
        """Keys, or ``(key, range_end)`` ranges, at one revision: a transaction of range requests and no compares."""
        requests = []
        for r in ranges:
            key, end = (r, None) if isinstance(r, bytes) else r
            requests.append({"request_range": {"key": _b64(key), **({"range_end": _b64(end)} if end else {})}})
        reply = self._call("kv/txn", {"success": requests})
        # The gateway leaves out a field at its zero value: a range that found nothing has no "kvs".
        return [list(r.get("response_range", {}).get("kvs", ())) for r in reply["responses"]]

    @staticmethod
    def _one(found: list[list[dict[str, Any]]]) -> list[dict[str, Any] | None]:
        return [kvs[0] if kvs else None for kvs in found]

    def _swap(self, pool_key: bytes, seen: dict[str, Any] | None, compares: list[dict[str, Any]],
              ops: list[dict[str, Any]]) -> bool:
        """Apply ``ops`` only if the pool's key is as read. A failed txn's reply has no ``succeeded`` key at all."""
        if seen is None:
            guard = _absent(pool_key)
        else:
            guard = {"key": _b64(pool_key), "target": "MOD", "result": "EQUAL", "mod_revision": seen["mod_revision"]}
        reply = self._call("kv/txn", {"compare": [guard, *compares], "success": ops})
        return bool(reply.get("succeeded", False))

    def _lease(self) -> str:
        reply = self._call("lease/grant", {"TTL": int(rules.RETENTION_S)})
        return str(reply["ID"])

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request, to each endpoint in turn until one answers; none answering is transient (75)."""
        why = "no endpoint"
        for i, client in enumerate(self.clients):
            try:
                reply = client.post(client.get_url(path), json=body)
            except (ConnectionFailedError, ConnectionTimeoutError, InternalServerError) as exc:
                why = type(exc).__name__
                continue
            except Etcd3Exception as exc:
                raise Transient(f"ledger {self.where.shown}: {path}: {exc.detail_text or exc}") from None
            if i:
                self.clients = self.clients[i:] + self.clients[:i]
            return reply
        raise Transient(f"ledger {self.where.shown} cannot be reached ({why})")


def _view(pool: str, kv: dict[str, Any] | None) -> PoolView:
    doc = _doc(kv) if kv else {}
    held = {c: int(n) for c, n in doc.get("held", {}).items()}
    hosts = {c: tuple(g) for c, g in doc.get("hosts", {}).items()}
    return PoolView(pool, held, hosts)


def _pool_doc(held: Mapping[str, int], hosts: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    return {"held": held, "hosts": {c: list(g) for c, g in hosts.items()}}


def _doc(kv: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(kv.get("value", "")))


def _put(key: bytes, doc: dict[str, Any], lease: str | None = None) -> dict[str, Any]:
    put: dict[str, Any] = {"key": _b64(key), "value": _b64(json.dumps(doc, sort_keys=True).encode())}
    if lease:
        put["lease"] = lease
    return {"request_put": put}


def _delete(key: bytes) -> dict[str, Any]:
    return {"request_delete_range": {"key": _b64(key)}}


def _absent(key: bytes) -> dict[str, Any]:
    return {"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _back_off() -> None:
    """A few milliseconds, at random, so that clusters that lost the same swap do not collide again."""
    time.sleep(random.uniform(0.002, 0.02))
