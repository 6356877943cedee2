"""The distributed controller: facts, leases, demand, host events and totals in an etcd cluster.

Keys, under ``/NAMESPACE/`` (see ``lease.etcd_client``):

``lease/<name>``     ownership keys (``lease.etcd``); a fence is the key's create revision
``facts/<seq>``      the facts one transaction appended, as lines of JSON without their seqs,
                     under the seq of the last one (zero-padded to 20 digits)
``ids/<id>``         the seq of a stored fact id (makes a repeated append idempotent)
``events/<seq>``     host events
``head/facts``       the last fact seq; ``head/events`` the last host event seq
``head/demand``      the current demand snapshot; its mod revision is its seq
``head/supply``      the scheduler's current view of its hosts; likewise
``demand-history/T-R`` past snapshots whose items changed, by the time T they were put (ms), kept for
                     DEMAND_HISTORY: what ``provisioner trace export`` reads
``totals/<name>``    shared-resource totals

**Fenced appends.** A batch is written in transactions of at most 120 facts
(etcd allows 128 operations per transaction by default; each fact costs one
compare and the put of its id, the facts themselves are one put). Each
transaction compares, for every lease its facts name, the
ownership key's create revision (the fence) and mod revision (which pins its
value, so holder and expiry, and its etcd lease) with the key as read when
the facts were judged; the head of the log's mod revision, so seqs are given
out by one writer at a time; and, for every fact, that its id is not stored
yet. If any compare fails, the same round trip reads back the head and the
leases, and the chunk is judged again; when neither moved, a fact's id is
stored already (a retry of a write that went in) and one more read finds
which. The failure branch holds no more, since etcd logs every transaction
whole, failure operations included: reading each id there cost etcd a fifth
of the work of an append that succeeded. So a fact lands only under the fence that is
current when it lands, and a batch's facts of one lease are refused together
from the first chunk that finds the lease gone.

**Order.** Seqs are consecutive and given out under the head's compare, so
commit order is seq order: a reader that has seen seq N never later finds a
new fact below it. Since each key is named by the last seq it holds, the
first key at or after ``facts/<N+1>`` holds fact N+1.

**Tailing.** ``changes`` reads by key from the cursor, never from the watch
history, so compaction loses nothing; a ``WatchBell`` on ``head/`` (small
keys: one event per append) wakes it.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from typing import Iterator, Sequence, TypeVar

import orjson

from lease.etcd import ATTEMPTS, Clock, EtcdLeases
from lease.etcd_client import (
    MAX_TXN_OPS,
    EtcdClient,
    EtcdTarget,
    KeyValue,
    TxnResult,
    absent,
    compare,
    delete_range_op,
    key_part,
    prefix_end,
    put_op,
    range_op,
)
from messages.base import Model
from messages.demand import DemandSnapshot, HostEvent, HostEventKind, SupplySnapshot
from messages.errors import ControllerUnavailable
from messages.facts import Fact, ResourceTotalChanged
from persistence.decoding import Decoder
from persistence.encoding import at_seq, stored_fact
from persistence.etcd_watch import WatchBell
from persistence.port import DEMAND_HISTORY, AppendResult, Changes, Cursor, RefusedFact, ResourceTotal

M = TypeVar("M", bound=Model)

#: Most facts ``changes`` hands out per call (the port's bound).
CHANGES_LIMIT = 10_000
#: Facts per transaction: one compare and one put each, plus a few for the head and the leases.
CHUNK_FACTS = MAX_TXN_OPS - 8
#: Most fact keys per range read (each holds at most CHUNK_FACTS facts).
PAGE_KEYS = 256
#: Fact keys of a read's first range, before it knows how many facts a key holds.
FIRST_KEYS = 8
#: Fact bytes per transaction, well within etcd's 1.5 MiB request limit once base64-encoded.
CHUNK_BYTES = 768 * 1024


class EtcdController:
    """``Controller`` on an etcd cluster, shared by daemon instances on several hosts."""

    def __init__(self, url: str, clock: Clock = time.time) -> None:
        self._client = EtcdClient(EtcdTarget.from_url(url))
        self.location = self._client.location
        self._clock = clock
        self._decode = Decoder(self.location)
        #: Facts per key in the last range read (see ``read``).
        self._facts_per_key: float | None = None
        self.leases = EtcdLeases(self._client, clock)
        key = self._client.key
        self._facts, self._events, self._ids = key("facts") + b"/", key("events") + b"/", key("ids") + b"/"
        self._head, self._fact_head, self._event_head = key("head") + b"/", key("head", "facts"), key("head", "events")
        self._demand, self._totals = key("head", "demand"), key("totals") + b"/"
        self._supply = key("head", "supply")
        self._history = key("demand-history") + b"/"
        #: The items this handle last put: an unchanged demand is not kept in the history again.
        self._last_demand: bytes | None = None
        # What this handle last knew of keys its transactions compare: a stale guess costs one round trip.
        self._known_fact_head: KeyValue | None = None
        self._known_event_head: KeyValue | None = None
        self._known_leases: dict[str, KeyValue | None] = {}
        self._append_lock = threading.Lock()
        self._event_lock = threading.Lock()
        self._bell: WatchBell | None = None
        self._bell_lock = threading.Lock()

    # --- facts ---------------------------------------------------------------

    def append(self, facts: Sequence[Fact]) -> AppendResult:
        facts = list(facts)
        if not facts:
            return AppendResult()
        unique: dict[str, Fact] = {}
        for fact in facts:
            unique.setdefault(fact.id, fact)
        outcome: dict[str, Fact | str] = {}
        with self._append_lock:
            for chunk in _chunks([(f, stored_fact(f)) for f in unique.values()]):
                outcome.update(self._append_chunk(chunk))
        # Every input gets its id's outcome: a repeat within the batch is accepted as its first copy.
        accepted = sorted((o for f in facts if isinstance(o := outcome[f.id], Fact)), key=lambda f: f.seq or 0)
        refused = [RefusedFact(id=f.id, lease=f.lease, fence=f.fence, reason=reason)
                   for f in facts if isinstance(reason := outcome[f.id], str)]
        return AppendResult(accepted=accepted, refused=refused)

    def _append_chunk(self, chunk: list[tuple[Fact, bytes]]) -> dict[str, Fact | str]:
        """Each fact's outcome: the fact as stored, or why it was refused."""
        outcome: dict[str, Fact | str] = {}
        pending = chunk
        for _ in self._tries():
            now = self._clock()
            names = list(dict.fromkeys(f.lease for f, _ in pending if f.lease))
            verdicts: dict[tuple[str, int], str | None] = {}
            for f, _ in pending:
                if f.lease and (f.lease, f.fence) not in verdicts:  # once per lease and fence, not per fact
                    verdicts[f.lease, f.fence] = self.leases.refusal(self._known_leases.get(f.lease), f.lease,
                                                                     f.fence, now)
            new = [(f, data) for f, data in pending if not f.lease or verdicts[f.lease, f.fence] is None]
            refused = [(f, reason) for f, _ in pending if f.lease and (reason := verdicts[f.lease, f.fence])]
            head = self._known_fact_head
            last = int(head.value) if head else 0
            compares = [compare(self._fact_head, "MOD", head.mod_revision if head else 0)]
            for name in names:
                kv = self._known_leases.get(name)
                compares += [compare(self.leases.key(name), "CREATE", kv.create_revision if kv else 0),
                             compare(self.leases.key(name), "MOD", kv.mod_revision if kv else 0)]
            id_keys = [self._id_key(f.id) for f, _ in new]
            compares += [absent(key) for key in id_keys]
            success = [put_op(key, b"%d" % seq) for seq, key in enumerate(id_keys, last + 1)]
            if new:
                success += [put_op(self._fact_key(last + len(new)), b"\n".join(data for _, data in new)),
                            put_op(self._fact_head, b"%d" % (last + len(new)))]
                # The totals a scheduler reads change with the fenced facts that say so, in the same txn.
                success += [put_op(self._client.key("totals", t.name), t.to_json()) for t in _totals(new)]
            success += [range_op(self._id_key(f.id)) for f, _ in refused]
            # Only the head and the leases: etcd logs a transaction's failure branch with every one that succeeds.
            failure = [range_op(self._fact_head)] + [range_op(self.leases.key(n)) for n in names]
            result = self._client.txn(compares, success, failure)
            if result.succeeded:
                if new:
                    self._known_fact_head = _advanced(self._fact_head, head, last + len(new), result)
                outcome.update((f.id, at_seq(f, last + 1 + i)) for i, (f, _) in enumerate(new))
                # A refused fact whose id is already stored is a retry of a write that went in.
                outcome.update(self._stored({f.id: (f, int(found[0].value))
                                             for (f, _), found in zip(refused, result.ranges) if found}))
                for f, reason in refused:
                    outcome.setdefault(f.id, reason)
                return outcome
            # Another writer came first: take what the failure branch read and judge again.
            self._known_fact_head = _one(result.ranges[0])
            moved = _revisions(self._known_fact_head) != _revisions(head)
            for name, found in zip(names, result.ranges[1:]):
                moved |= _revisions(_one(found)) != _revisions(self._known_leases.get(name))
                self._known_leases[name] = _one(found)
            if moved:
                continue
            # Neither the head nor a lease moved, so an id compare failed: a retry of facts that went in.
            found_ids = self._client.txn([], [range_op(key) for key in id_keys]).ranges
            stored = {f.id: (f, int(found[0].value)) for (f, _), found in zip(new, found_ids) if found}
            if stored:
                outcome.update(self._stored(stored))
                pending = [(f, data) for f, data in pending if f.id not in stored]
                if not pending:
                    return outcome
        raise ControllerUnavailable(f"controller {self.location}: append gave up; other writers kept changing the log")

    def _stored(self, found: dict[str, tuple[Fact, int]]) -> dict[str, Fact]:
        """The stored copies of facts already in the log, by id."""
        if not found:
            return {}
        end = prefix_end(self._facts)
        result = self._client.txn([], [range_op(self._fact_key(seq), end, 1) for _, seq in found.values()])
        out = {}
        for (fact_id, (fact, seq)), kvs in zip(found.items(), result.ranges):
            lines = dict(self._unpack(kvs[0])) if kvs else {}
            # A stored copy that no longer decodes is still the same fact, at its seq.
            copy = self._decode.fact(seq, lines[seq]) if seq in lines else None
            out[fact_id] = copy or at_seq(fact, seq)
        return out

    def read(self, after: int = 0, limit: int = 10_000) -> list[Fact]:
        """Up to ``limit`` facts after ``after``, fetching about as many keys as they fill.

        A key holds one fact or a whole batch (up to ``CHUNK_FACTS``), so a fixed
        number of keys per range could fetch a hundred times the facts asked for,
        and a replay in small reads would fetch the log over and over. Each range is
        sized by how many facts the keys of the last one held (a small first range
        finds out).
        """
        out: list[Fact] = []
        last = after
        while len(out) < limit:
            per_key = self._facts_per_key
            keys = FIRST_KEYS if per_key is None else math.ceil((limit - len(out)) / per_key) + 1
            kvs, more = self._client.range(self._fact_key(last + 1), prefix_end(self._facts),
                                           max(1, min(PAGE_KEYS, keys)))
            if kvs:
                self._facts_per_key = sum(kv.value.count(b"\n") + 1 for kv in kvs) / len(kvs)
            facts, last = self._parse_facts(kvs, last, limit - len(out))
            out += facts
            if not more:
                break
        return out

    def _parse_facts(self, kvs: list[KeyValue], after: int, limit: int) -> tuple[list[Fact], int]:
        """Up to ``limit`` facts after ``after`` that decode, and the last seq looked at."""
        out: list[Fact] = []
        last = after
        for kv in kvs:
            for seq, line in self._unpack(kv):
                if seq <= after:
                    continue
                if len(out) == limit:
                    return out, last
                last = seq
                fact = self._decode.fact(seq, line)
                if fact is not None:
                    out.append(fact)
        return out, last

    def _unpack(self, kv: KeyValue) -> list[tuple[int, bytes]]:
        """The ``(seq, stored fact)`` pairs of one fact key."""
        lines = kv.value.split(b"\n")
        first = int(kv.key[len(self._facts):]) - len(lines) + 1
        return [(first + i, line) for i, line in enumerate(lines)]

    def last_seq(self) -> int:
        head = self._client.get(self._fact_head)
        return int(head.value) if head else 0

    # --- inputs from the scheduler and operators ----------------------------

    def put_demand(self, snapshot: DemandSnapshot) -> DemandSnapshot:
        now = self._clock()
        items = snapshot.model_dump(mode="json", exclude_none=True)["items"]
        value = orjson.dumps({"items": items, "time": now})
        ops = [put_op(self._demand, value)]
        shape = orjson.dumps(items)
        if shape != self._last_demand:
            # Kept under the time it was put (then a random part: several handles may put at once),
            # so that what is older than DEMAND_HISTORY goes in one range delete of the same transaction.
            ops.append(put_op(self._history_key(now) + b"-" + uuid.uuid4().hex[:8].encode(), value))
        ops.append(delete_range_op(self._history, self._history_key(now - DEMAND_HISTORY)))
        revision = self._client.txn([], ops).revision
        self._last_demand = shape
        return snapshot.model_copy(update={"seq": revision, "time": now})

    def _history_key(self, at: float) -> bytes:
        return self._history + f"{max(0, int(at * 1000)):016d}".encode()

    def demand_history(self, since: float, until: float | None = None) -> list[DemandSnapshot]:
        end = self._history_key(until + 0.001) if until is not None else prefix_end(self._history)
        out: list[DemandSnapshot] = []
        start = self._history_key(since)
        while True:
            kvs, more = self._client.range(start, end, limit=1000)
            for kv in kvs:
                snap = self._parse_demand(kv)
                if snap is not None:
                    out.append(snap)
            if not more or not kvs:
                return out
            start = kvs[-1].key + b"\0"

    def get_demand(self) -> DemandSnapshot | None:
        kv = self._client.get(self._demand)
        return self._parse_demand(kv) if kv is not None else None

    def _parse_demand(self, kv: KeyValue) -> DemandSnapshot | None:
        return self._parse("demand", DemandSnapshot, kv.mod_revision, kv.value)

    def put_supply(self, snapshot: SupplySnapshot) -> SupplySnapshot:
        now = self._clock()
        doc = snapshot.model_dump(mode="json", exclude_none=True, include={"hosts", "resources"})
        revision = self._client.put(self._supply, orjson.dumps({**doc, "time": now}))
        return snapshot.model_copy(update={"seq": revision, "time": now})

    def get_supply(self) -> SupplySnapshot | None:
        kv = self._client.get(self._supply)
        return self._parse("supply view", SupplySnapshot, kv.mod_revision, kv.value) if kv is not None else None

    def post_host_event(self, name: str, event: HostEventKind, time: float,
                        provider: str | None = None) -> HostEvent:
        checked = HostEvent(name=name, event=event, time=time, provider=provider)
        data = orjson.dumps(checked.model_dump(mode="json", exclude={"seq"}, exclude_none=True))
        with self._event_lock:
            for _ in self._tries():
                head = self._known_event_head
                seq = (int(head.value) if head else 0) + 1
                result = self._client.txn(
                    [compare(self._event_head, "MOD", head.mod_revision if head else 0)],
                    [put_op(self._event_key(seq), data), put_op(self._event_head, b"%d" % seq)],
                    [range_op(self._event_head)])
                if result.succeeded:
                    self._known_event_head = _advanced(self._event_head, head, seq, result)
                    return checked.model_copy(update={"seq": seq})
                self._known_event_head = _one(result.ranges[0])
        raise ControllerUnavailable(f"controller {self.location}: host event gave up; other writers kept posting")

    def read_host_events(self, after: int = 0, limit: int = 10_000) -> list[HostEvent]:
        kvs, _ = self._client.range(self._event_key(after + 1), prefix_end(self._events), max(1, limit))
        return self._parse_events(kvs[: max(0, limit)], after)[0]

    def _parse_events(self, kvs: list[KeyValue], last: int) -> tuple[list[HostEvent], int]:
        out = []
        for kv in kvs:
            last = int(kv.key[len(self._events):])
            event = self._parse("host event", HostEvent, last, kv.value)
            if event is not None:
                out.append(event)
        return out, last

    def resource_totals(self) -> list[ResourceTotal]:
        kvs, _ = self._client.range(self._totals, prefix_end(self._totals))
        totals = [ResourceTotal.from_json(kv.value) for kv in kvs]
        return sorted(totals, key=lambda t: t.name)

    # --- push -----------------------------------------------------------------

    def changes(self, cursor: Cursor, timeout: float) -> Changes:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            found, revision = self._changes_since(cursor)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Changes(cursor=cursor)
            self._bell_from(revision + 1).wait_beyond(revision, remaining)

    def _changes_since(self, cursor: Cursor) -> tuple[Changes | None, int]:
        """What is new beyond ``cursor`` (None if nothing), read in one snapshot, and its revision."""
        result = self._client.txn([], [
            range_op(self._fact_key(cursor.facts + 1), prefix_end(self._facts), PAGE_KEYS),
            range_op(self._demand),
            range_op(self._event_key(cursor.host_events + 1), prefix_end(self._events), CHANGES_LIMIT),
            range_op(self._supply),
        ])
        fact_kvs, demand_kvs, event_kvs, supply_kvs = result.ranges
        facts, fact_seq = self._parse_facts(fact_kvs, cursor.facts, CHANGES_LIMIT)
        demand = None
        if demand_kvs and demand_kvs[0].mod_revision > cursor.demand:
            demand = self._parse_demand(demand_kvs[0])
        events, event_seq = self._parse_events(event_kvs, cursor.host_events)
        supply = None
        if supply_kvs and supply_kvs[0].mod_revision > cursor.supply:
            supply = self._parse("supply view", SupplySnapshot, supply_kvs[0].mod_revision, supply_kvs[0].value)
        new_cursor = Cursor(
            facts=fact_seq,
            demand=demand_kvs[0].mod_revision if demand_kvs else cursor.demand,
            host_events=event_seq,
            supply=supply_kvs[0].mod_revision if supply_kvs else cursor.supply,
        )
        if new_cursor == cursor:
            return None, result.revision
        return Changes(cursor=new_cursor, facts=facts, demand=demand, host_events=events, supply=supply), \
            result.revision

    def _bell_from(self, revision: int) -> WatchBell:
        with self._bell_lock:
            if self._bell is None:
                self._bell = WatchBell(self._client, self._head, revision)
            return self._bell

    # --- keys and lifecycle ---------------------------------------------------

    def _tries(self) -> Iterator[int]:
        """Attempts at a transaction that competes for a head key, for as long as one call may take.

        Someone else's commit is what fails a try, so the log always moves on;
        a short random pause keeps one writer from losing every race.
        """
        deadline = time.monotonic() + self._client.target.timeout
        tries = 0
        while tries < ATTEMPTS or time.monotonic() < deadline:
            if tries:
                time.sleep(random.uniform(0, 0.002 * min(tries, 10)))
            yield tries
            tries += 1

    def _fact_key(self, seq: int) -> bytes:
        return self._facts + b"%020d" % seq

    def _id_key(self, fact_id: str) -> bytes:
        """``key("ids", fact_id)``, the prefix made once."""
        return self._ids + key_part(fact_id)

    def _event_key(self, seq: int) -> bytes:
        return self._events + b"%020d" % seq

    def _parse(self, what: str, model: type[M], seq: int, value: bytes) -> M | None:
        """A stored JSON object as ``model`` with the store's ``seq``; None (warned once) if it does not decode."""
        return self._decode(what, seq, lambda: model.model_validate({**orjson.loads(value), "seq": seq}))

    def close(self) -> None:
        with self._bell_lock:
            bell, self._bell = self._bell, None
        if bell is not None:
            bell.close()
        self.leases.close()
        self._client.close()


def _totals(facts: list[tuple[Fact, bytes]]) -> list[ResourceTotal]:
    """The last total each resource's facts in a chunk say."""
    out: dict[str, ResourceTotal] = {}
    for f, _ in facts:
        if isinstance(p := f.payload, ResourceTotalChanged):
            out[p.resource] = ResourceTotal(name=p.resource, base=p.base, borrowed=p.borrowed, total=p.total,
                                            time=f.time)
    return list(out.values())


def _chunks(facts: list[tuple[Fact, bytes]]) -> list[list[tuple[Fact, bytes]]]:
    """Split a batch so each transaction stays within etcd's operation and size limits."""
    chunks: list[list[tuple[Fact, bytes]]] = []
    chunk: list[tuple[Fact, bytes]] = []
    names: set[str] = set()
    totals: set[str] = set()
    size = 0
    for fact, data in facts:
        # A new set only for a lease or resource the chunk does not name yet.
        grown = names | {fact.lease} if fact.lease and fact.lease not in names else names
        p = fact.payload
        more = totals | {p.resource} if isinstance(p, ResourceTotalChanged) and p.resource not in totals else totals
        # Compares: the head, two per lease, one per fact. Puts: one per fact, the facts, the head, the totals.
        if chunk and (len(chunk) == CHUNK_FACTS or 1 + 2 * len(grown) + len(chunk) + 1 > MAX_TXN_OPS
                      or len(chunk) + 1 + 2 + len(more) > MAX_TXN_OPS or size + len(data) > CHUNK_BYTES):
            chunks.append(chunk)
            chunk, size = [], 0
            grown = {fact.lease} if fact.lease else set()
            more = {p.resource} if isinstance(p, ResourceTotalChanged) else set()
        chunk.append((fact, data))
        names, totals, size = grown, more, size + len(data)
    if chunk:
        chunks.append(chunk)
    return chunks


def _one(kvs: list[KeyValue]) -> KeyValue | None:
    return kvs[0] if kvs else None


def _revisions(kv: KeyValue | None) -> tuple[int, int]:
    """What a transaction compares of a key: its create and mod revisions (0 for an absent key)."""
    return (kv.create_revision, kv.mod_revision) if kv else (0, 0)


def _advanced(key: bytes, head: KeyValue | None, value: int, result: TxnResult) -> KeyValue:
    """A head key as the successful transaction ``result`` left it."""
    created = head.create_revision if head else result.revision
    return KeyValue(key=key, value=b"%d" % value, create_revision=created, mod_revision=result.revision, lease=0)
