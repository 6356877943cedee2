"""Ownership leases in etcd: one ownership key per role, one etcd lease per daemon instance.

A role's key ``/NS/lease/<name>`` holds ``{holder, expires_at, granted_at}``
(``granted_at``: when its grant was made, by the controller clock; a key an
older version wrote has none, and its grant's moment is unknown). Its **fence
is the key's create revision**: a grant creates the key in a transaction only
if it is absent, so every grant gets an etcd revision, and revisions only
grow. A release leaves a tombstone (``holder: ""``) so a late write can be
told it came after a release; the next grant deletes the tombstone (or the
expired record) and creates the key anew, under a higher revision.

Two clocks end a grant, whichever comes first:

- ``expires_at``, judged by the controller clock (``time.time`` unless one is
  injected, as the contract tests do). This ends the grant of a daemon that
  is alive but stopped renewing, and is what ``get``/``all``/``renew`` judge.
- The instance's etcd lease, to which every key this handle grants or renews
  is attached. Only ``acquire`` and ``renew`` keep it alive, so it lapses
  when the holder stops renewing (a killed process, a cut link) and etcd
  deletes the keys by itself, ~0.5 s after its TTL, without any clock of
  ours. etcd restarts a lease's TTL when its leader changes, so that TTL is a
  minimum: the expiry by ``expires_at`` bounds the wait.

Because the renewal that extends ``expires_at`` also refreshes the etcd lease,
both end no earlier than the holder's own deadline (the lease actor stops
acting ``ttl - renew_every/2`` after its last successful renewal). A renewal
never waits past the grant's expiry: with etcd unreachable, the holder hears
"unavailable" by then, however long the call timeout. Hosts'
clocks must agree to well within ``renew_every/2`` (NTP): skew moves a
takeover earlier or later, but a write under an old fence is refused
regardless, because appends compare the key's revisions, not clocks.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Callable
from urllib.parse import unquote

import orjson

from lease.etcd_client import EtcdClient, KeyValue, TxnResult, compare, delete_op, prefix_end, put_op, range_op
from lease.port import Lease, LeaseRecord
from lease.sqlite import _check_name, _check_ttl, _held
from messages.errors import ControllerUnavailable

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: Tries of a compare-and-write before giving up; only a concurrent writer of the same key makes one fail.
ATTEMPTS = 8


class InstanceSession:
    """The one etcd lease of a controller handle (a daemon instance), granted at its first acquire."""

    def __init__(self, client: EtcdClient) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._id = 0
        self._ttl = 0

    def live(self, ttl: float) -> int:
        """The id of an etcd lease refreshed just now whose TTL covers ``ttl``.

        A new one is granted at the first call, after the previous one expired
        (its keys are gone with it), or when a longer ``ttl`` is asked for
        (keys move to it as they are renewed).
        """
        seconds = max(1, math.ceil(ttl))
        with self._lock:
            if self._id and seconds <= self._ttl and self._client.keepalive(self._id):
                return self._id
            if self._id and seconds <= self._ttl:
                log.warning("controller %s: the etcd lease of this instance expired; its leases are gone",
                            self._client.location)
            self._id, self._ttl = self._client.grant(seconds), seconds
            return self._id

    def revoke(self) -> None:
        """End the etcd lease now: keys still attached to it vanish at once."""
        with self._lock:
            lease_id, self._id = self._id, 0
        if lease_id:
            try:
                self._client.revoke(lease_id)
            except ControllerUnavailable as exc:
                log.warning("controller %s: could not revoke the instance lease, it will expire: %s",
                            self._client.location, exc)


class EtcdLeases:
    """``LeasePort`` on etcd; expiry is judged by the controller clock and by etcd's lease TTL."""

    def __init__(self, client: EtcdClient, clock: Clock) -> None:
        self._client = client
        self._clock = clock
        self._session = InstanceSession(client)
        self.prefix = client.key("lease") + b"/"

    def key(self, name: str) -> bytes:
        return self._client.key("lease", name)

    def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        _check_name(name, "lease name")
        _check_name(holder, "lease holder")
        _check_ttl(ttl)
        key = self.key(name)
        kv = self._client.get(key)
        for _ in range(ATTEMPTS):
            now = self._clock()
            record = self.record(kv)
            if kv is not None and _held(*record, now):
                if record[0] != holder:
                    return None
                result, fence = self._extend(key, kv, holder, now + ttl, ttl), kv.create_revision
            elif kv is not None:
                # Released or expired: a new grant needs a new key, whose create revision is the new fence.
                result = self._client.txn([compare(key, "MOD", kv.mod_revision)], [delete_op(key)], [range_op(key)])
                kv = None if result.succeeded else _first(result)
                continue
            else:
                value = _value(holder, now + ttl, now)
                result = self._client.txn([compare(key, "CREATE", 0)],
                                          [put_op(key, value, self._session.live(ttl))], [range_op(key)])
                fence = result.revision
            if result.succeeded:
                return Lease(name=name, holder=holder, fence=fence, expires_at=now + ttl)
            kv = _first(result)
        return None

    def acquire_all(self, names: list[str], holder: str, ttl: float) -> list[Lease | None]:
        # Each key has its own compare-and-create (a fence is its key's create revision).
        return [self.acquire(name, holder, ttl) for name in names]

    def renew(self, lease: Lease, ttl: float) -> Lease | None:
        _check_ttl(ttl)
        left = lease.expires_at - self._clock()
        if left <= 0:
            return None
        key = self.key(lease.name)
        # Past its expiry a renewal cannot succeed: its holder learns that at once instead of after a timeout.
        with self._client.until(time.monotonic() + left):
            kv = self._client.get(key)
            for _ in range(ATTEMPTS):
                now = self._clock()
                if not self._is_grant(kv, lease, now):
                    return None
                assert kv is not None
                result = self._extend(key, kv, lease.holder, now + ttl, ttl)
                if result.succeeded:
                    return lease.model_copy(update={"expires_at": now + ttl})
                kv = _first(result)
        return None

    def renew_all(self, leases: list[Lease], ttl: float) -> list[Lease | None]:
        # Each key keeps its own compare-and-extend; they share the instance's one etcd lease.
        return [self.renew(lease, ttl) for lease in leases]

    def release(self, lease: Lease) -> bool:
        key = self.key(lease.name)
        kv = self._client.get(key)
        for _ in range(ATTEMPTS):
            if not self._is_grant(kv, lease, self._clock()):
                return False
            assert kv is not None
            # The tombstone has no etcd lease: it outlives this instance, so late writes learn of the release.
            result = self._client.txn(
                [compare(key, "CREATE", lease.fence), compare(key, "MOD", kv.mod_revision)],
                [put_op(key, _value("", 0.0, None))], [range_op(key)])
            if result.succeeded:
                return True
            kv = _first(result)
        return False

    def get(self, name: str) -> Lease | None:
        kv = self._client.get(self.key(name))
        return self._lease(kv, self._clock()) if kv is not None else None

    def all(self) -> list[Lease]:
        kvs, _ = self._client.range(self.prefix, prefix_end(self.prefix))
        now = self._clock()
        found = [self._lease(kv, now) for kv in kvs]
        return sorted((lease for lease in found if lease is not None), key=lambda lease: lease.name)

    def table(self) -> list[LeaseRecord]:
        kvs, _ = self._client.range(self.prefix, prefix_end(self.prefix))
        now = self._clock()
        out = []
        for kv in kvs:
            holder, expires_at = self.record(kv)
            granted_at = _granted_at(kv) if holder else None
            out.append(LeaseRecord(
                name=self._name(kv), holder=holder, fence=kv.create_revision,
                expires_in=expires_at - now if holder else None,
                granted_ago=now - granted_at if granted_at is not None else None))
        return sorted(out, key=lambda record: record.name)

    def refusal(self, kv: KeyValue | None, name: str, fence: int, now: float) -> str | None:
        """Why a write under ``name`` at ``fence`` must be refused, given the key as read, or None.

        The caller's append transaction compares the key's revisions with
        ``kv``'s, so the verdict holds at the moment the facts are written.
        """
        if kv is None:
            return f"no such lease {name}"
        holder, expires_at = self.record(kv)
        if kv.create_revision != fence:
            state = "is held" if _held(holder, expires_at, now) else "has moved on"
            return f"lease {name} {state} under fence {kv.create_revision}, fact has {fence}"
        if not holder:
            return f"lease {name} was released (fence {fence})"
        if expires_at <= now:
            return f"lease {name} expired (fence {fence})"
        return None

    def record(self, kv: KeyValue | None) -> tuple[str, float]:
        """``(holder, expires_at)`` of an ownership key; ("", 0) when absent."""
        if kv is None:
            return "", 0.0
        try:
            doc = orjson.loads(kv.value)
            return str(doc["holder"]), float(doc["expires_at"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            name = self._name(kv)
            raise ControllerUnavailable(
                f"controller {self._client.location}: lease record {name} does not decode; "
                "it was not written by this version"
            ) from None

    def close(self) -> None:
        self._session.revoke()

    def _extend(self, key: bytes, kv: KeyValue, holder: str, expires_at: float, ttl: float) -> TxnResult:
        """Rewrite a held key under the same fence, attached to this instance's refreshed etcd lease; the
        grant keeps the moment it was made."""
        return self._client.txn(
            [compare(key, "CREATE", kv.create_revision), compare(key, "MOD", kv.mod_revision)],
            [put_op(key, _value(holder, expires_at, _granted_at(kv)), self._session.live(ttl))], [range_op(key)])

    def _name(self, kv: KeyValue) -> str:
        return unquote(kv.key[len(self.prefix):].decode("ascii", "replace"))

    def _is_grant(self, kv: KeyValue | None, lease: Lease, now: float) -> bool:
        """Whether ``kv`` is ``lease``'s grant, still current."""
        if kv is None or kv.create_revision != lease.fence:
            return False
        record = self.record(kv)
        return record[0] == lease.holder and _held(*record, now)

    def _lease(self, kv: KeyValue, now: float) -> Lease | None:
        record = self.record(kv)
        if not _held(*record, now):
            return None
        return Lease(name=self._name(kv), holder=record[0], fence=kv.create_revision, expires_at=record[1])


def _first(result: TxnResult) -> KeyValue | None:
    """The key as the failed transaction's range read it."""
    return result.ranges[0][0] if result.ranges and result.ranges[0] else None


def _value(holder: str, expires_at: float, granted_at: float | None) -> bytes:
    doc: dict[str, object] = {"holder": holder, "expires_at": expires_at}
    if granted_at is not None:
        doc["granted_at"] = granted_at
    return orjson.dumps(doc)


def _granted_at(kv: KeyValue) -> float | None:
    """When the grant a key holds was made; None for a key an older version wrote (or a tombstone)."""
    try:
        value = orjson.loads(kv.value).get("granted_at")
        return float(value) if value is not None else None
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return None
