"""Snapshots of the projection, so a start replays only the facts written since.

A snapshot is derived data: the state a replay of the log up to ``seq``
builds, kept in a local file so that a restart decodes it instead of every
fact. It never replaces the log: readers replay every fact after its
``seq``, and a snapshot that cannot be trusted (another log, other
projection code, ahead of the log, damaged) is ignored with a warning,
costing a full replay and nothing else.

The file is one JSON header line (format, schema, seq, the id of the fact at
``seq``, the body's length and SHA-256) followed by the body: orjson of the
records as rows in field order, never pickle. The schema is a digest of the
code that shapes the records, so a snapshot written by other projection code
is never mistaken for what this code would build. Files are written under a
temporary name, fsynced, then renamed over the old one: a crash at any step
leaves the previous snapshot or the new one, whole.

Decoding builds the immutable parts (histories, orders, descriptions) once;
every projection restored from one ``Snapshot`` shares them and gets its own
mutable records, so several actors restore from one decoded file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from itertools import chain, islice, starmap
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Mapping

import orjson
from pydantic import BaseModel

from messages.description import ProviderDescription
from messages.facts import BudgetEvent, Decision, Order
from messages.records import (
    DecisionRecord,
    GrantRecord,
    InstanceRecord,
    NodeRecord,
    OrderRecord,
    ProviderRecord,
    RequestRecord,
    ResourceRecord,
)
from messages.states import History
from persistence.port import Controller
from persistence.private import private_dir
from state.projection import Part, Projection, bulk

log = logging.getLogger(__name__)

FORMAT = "provisioner-snapshot"
VERSION = 1
#: Seconds after which a temporary file no writer finished is removed.
ABANDONED = 600.0


def _schema() -> str:
    """A digest of the code that decides what a projection holds: any change there voids old snapshots."""
    digest = hashlib.sha256(f"{FORMAT}/{VERSION}".encode())
    for name in ("messages.facts", "messages.description", "messages.records", "messages.states",
                 "state.projection", __name__):
        try:
            digest.update(Path(sys.modules[name].__file__ or "").read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()[:32]


SCHEMA = _schema()


_TEXT = {str, type(None)}


class _Plain:
    """A column of JSON values; strings that repeat (states, providers, templates) are stored once."""

    def encode(self, values: list[Any]) -> Any:
        if values and set(map(type, values)) <= _TEXT:
            distinct = list(dict.fromkeys(values))
            if len(distinct) * 4 <= len(values):
                where = {v: i for i, v in enumerate(distinct)}
                return {"values": distinct, "index": list(map(where.__getitem__, values))}
        return values

    def decode(self, data: Any) -> list[Any]:
        if isinstance(data, dict):
            return list(map(data["values"].__getitem__, data["index"]))
        if not isinstance(data, list):
            raise ValueError(f"a column of {type(data).__name__}")
        return data


_PLAIN = _Plain()


class _Histories:
    """A column of histories, flattened: one entry per change, and each history's length."""

    def encode(self, values: list[History]) -> Any:
        # A history is flat: (state, at, reason) per change. No slice per history: a snapshot is
        # written while the daemon runs, and its garbage would leave holes in the heap.
        return {
            "length": [len(h) // 3 for h in values],
            "state": _PLAIN.encode([s for h in values for s in islice(h, 0, None, 3)]),
            "at": [at for h in values for at in islice(h, 1, None, 3)],
            "reason": _PLAIN.encode([r for h in values for r in islice(h, 2, None, 3)]),
        }

    def decode(self, data: Any) -> list[History]:
        changes = list(zip(_PLAIN.decode(data["state"]), _PLAIN.decode(data["at"]), _PLAIN.decode(data["reason"]),
                           strict=True))
        out, at = [], 0
        for n in data["length"]:
            if n < 0 or at + n > len(changes):
                raise ValueError("history lengths do not add up to the changes stored")
            out.append(History(chain.from_iterable(changes[at:at + n])))
            at += n
        if at != len(changes):
            raise ValueError("history lengths do not add up to the changes stored")
        return out


class _Models:
    """A column of pydantic models (or None), validated again on the way back."""

    def __init__(self, cls: type[BaseModel]) -> None:
        self.cls = cls

    def encode(self, values: list[BaseModel | None]) -> Any:
        return [None if m is None else m.model_dump(mode="json") for m in values]

    def decode(self, data: Any) -> list[BaseModel | None]:
        validate = self.cls.model_validate
        return [None if d is None else validate(d) for d in _PLAIN.decode(data)]


class _Tuples:
    """A column of lists of tuples (``given_back``, ``peaks``): JSON keeps the lists, the tuples come back here."""

    def encode(self, values: list[list[tuple[Any, ...]]]) -> Any:
        return values

    def decode(self, data: Any) -> list[list[tuple[Any, ...]]]:
        return [[tuple(t) for t in v] for v in _PLAIN.decode(data)]


Codec = _Plain | _Histories | _Models | _Tuples

_HISTORY = _Histories()
_PLAIN_TYPES = {"str", "int", "float", "bool", "list[str]"}
_MODELS = {"ProviderDescription": ProviderDescription, "Order": Order, "Decision": Decision}


def _codec(cls: type, f: dataclasses.Field) -> Codec:
    """The codec a record field's annotation calls for; a field no codec knows is an error at import."""
    kind = str(f.type).removesuffix(" | None")
    if kind in _PLAIN_TYPES:
        return _PLAIN
    if kind == "History":
        return _HISTORY
    if kind in _MODELS:
        return _Models(_MODELS[kind])
    if kind.startswith("list[tuple["):
        return _Tuples()
    raise TypeError(f"snapshot: no codec for {cls.__name__}.{f.name} ({f.type}); teach persistence/snapshot.py")


class _Kind:
    """How the records of one type become columns and back; immutable parts are built once, lists copied."""

    def __init__(self, cls: type, attr: str, owner: str | None = "provider") -> None:
        fields = dataclasses.fields(cls)
        self.cls = cls
        self.attr = attr
        self.names = [f.name for f in fields]
        self.codecs = [_codec(cls, f) for f in fields]
        #: the column naming the provider a record belongs to (parts pick records by it)
        self.owner = self.names.index(owner) if owner else -1
        #: mutable list fields: every restored record gets its own copy
        self.lists = [f.name for f in fields if f.default_factory is list]

    def encode(self, records: Iterable[Any]) -> dict[str, Any]:
        # Column by column, with no row tuple per record: see ``_Histories.encode``.
        records = list(records)
        return {name: codec.encode(list(map(attrgetter(name), records)))
                for name, codec in zip(self.names, self.codecs)}

    def decode(self, data: Mapping[str, Any], n: int) -> list[tuple[Any, ...]]:
        """Rows in field order, to be shared by every projection restored from them."""
        columns = []
        for name, codec in zip(self.names, self.codecs):
            column = codec.decode(data[name])
            if len(column) != n:
                raise ValueError(f"{self.attr}.{name}: {len(column)} values for {n} records")
            columns.append(column)
        return list(zip(*columns))

    def build(self, rows: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
        """New records from decoded rows, keyed as the rows are."""
        records = dict(zip(rows, starmap(self.cls, rows.values())))
        for name in self.lists:
            for rec in records.values():
                setattr(rec, name, list(getattr(rec, name)))
        return records


_KINDS = (
    _Kind(ProviderRecord, "providers", owner="name"),
    _Kind(OrderRecord, "orders"),
    _Kind(RequestRecord, "requests"),
    _Kind(InstanceRecord, "instances"),
    _Kind(GrantRecord, "grants"),
    _Kind(ResourceRecord, "resources"),
    _Kind(NodeRecord, "nodes"),
)
_OWNER = {k.attr: k.owner for k in _KINDS}
#: Where an instance row holds its key (the record keeps the key it is stored under).
_INSTANCE_KEY = [f.name for f in dataclasses.fields(InstanceRecord)].index("key")
#: The projection's ordered key sets, and the records their keys point into.
_INDEXES = {"open_orders": "orders", "open_requests": "requests", "live_instances": "instances",
            "live_grants": "grants"}
_DECISIONS = _Kind(DecisionRecord, "decisions", owner=None)  # global: every part keeps them
#: Every attribute of a projection a snapshot carries or rebuilds (``_only`` is the filter, never saved).
_STATE = {"_only", "seq", "planner", *(k.attr for k in _KINDS), "parts",
          "host_event_seq", "decisions", "item_decisions", "budget_events", "anomalies"}
_BUDGET_EVENTS = _Models(BudgetEvent)


@dataclass
class Snapshot:
    """A decoded snapshot: the projection's state at ``seq``, ready to restore any number of times."""

    seq: int
    #: The id of the fact at ``seq``: ties the snapshot to one log.
    fact_id: str
    #: Facts up to ``seq`` by kind (the read model's counters go on from here).
    counts: dict[str, int]
    planner: tuple[str, int]
    #: per record kind: key -> row, in the projection's order
    rows: dict[str, dict[str, tuple[Any, ...]]]
    #: the projection's ordered key sets (``open_orders`` ...)
    indexes: dict[str, list[str]]
    host_event_seq: dict[str, int]
    decisions: list[tuple[Any, ...]]
    #: per item, the indexes into ``item_records`` of its last wanting, first after, and last decision (-1: none)
    item_slots: list[tuple[str, list[int]]]
    item_records: list[tuple[Any, ...]]
    budget_events: list[tuple[float, BudgetEvent]]
    anomalies: list[str]
    _owners: dict[str, dict[str, list[tuple[int, str]]]] | None = field(default=None, repr=False, compare=False)

    def part(self, providers: Iterable[str] | None) -> "Snapshot":
        """What a projection fed only the facts of ``providers`` (and global facts) holds; None: all.

        Records of other providers are left out; what global facts say (the
        planner's lease, decisions, budget events) stays, and so do resources
        no provider has claimed yet. Each part costs only its own records,
        however many providers the snapshot holds.
        """
        if providers is None:
            return self
        wanted = set(providers)
        owners = self._by_owner()

        def keys(name: str, extra: str | None = None) -> list[str]:
            found = [owners[o][name] for o in (*wanted, extra) if o in owners and name in owners[o]]
            merged = found[0] if len(found) == 1 else sorted(chain.from_iterable(found))
            return [k for _, k in merged]

        rows = {}
        for attr, all_rows in self.rows.items():
            rows[attr] = {k: all_rows[k] for k in keys(attr, "" if attr == "resources" else None)}
        return dataclasses.replace(
            self,
            rows=rows,
            indexes={name: keys(name) for name in self.indexes},
            host_event_seq={p: s for p, s in self.host_event_seq.items() if p in wanted},
            anomalies=[],
            _owners=None,
        )

    def _by_owner(self) -> dict[str, dict[str, list[tuple[int, str]]]]:
        """owner -> list name -> (position, key): one pass over everything, then parts pick their own."""
        if self._owners is None:
            owners: dict[str, dict[str, list[tuple[int, str]]]] = {}

            def group(name: str, keys: Iterable[str], target: str) -> None:
                records, column = self.rows[target], _OWNER[target]
                for pos, k in enumerate(keys):
                    owners.setdefault(records[k][column], {}).setdefault(name, []).append((pos, k))

            for attr, records in self.rows.items():
                group(attr, records, attr)
            for name, keys in self.indexes.items():
                group(name, keys, _INDEXES[name])
            self._owners = owners
        return self._owners

    def projection(self, keep_decisions: int = 1000) -> Projection:
        """A new projection holding this state; it goes on applying the facts after ``seq``."""
        p = Projection(keep_decisions=keep_decisions)
        with bulk():
            p.seq = self.seq
            p.planner = self.planner
            for kind in _KINDS:
                setattr(p, kind.attr, kind.build(self.rows[kind.attr]))
            # One string per instance key, as a replay builds: the record's own, in every index.
            p.instances = {inst.key: inst for inst in p.instances.values()}
            p.parts = {owner: _part(lists, p.instances) for owner, lists in self._by_owner().items()
                       if any(kind in lists for kind in _MOVING)}
            p.host_event_seq = dict(self.host_event_seq)
            p.decisions.extend(starmap(DecisionRecord, self.decisions))
            records = list(starmap(DecisionRecord, self.item_records))
            p.item_decisions.items = {item: [records[i] if i >= 0 else None for i in slots]
                                      for item, slots in self.item_slots}
            p.budget_events.extend(self.budget_events)
            p.anomalies.extend(self.anomalies)
        return p


def encode(p: Projection, fact_id: str, counts: Mapping[str, int]) -> bytes:
    """The body of a snapshot of ``p`` (``fact_id`` is the id of the fact at ``p.seq``)."""
    unknown = set(vars(p)) - _STATE
    if unknown:
        # State a snapshot would drop: restoring it would differ from a replay. Fail loudly instead.
        raise TypeError(f"snapshot: projection state {sorted(unknown)} has no place in a snapshot")
    with bulk():
        return orjson.dumps(_body(p, fact_id, counts))


def _body(p: Projection, fact_id: str, counts: Mapping[str, int]) -> dict[str, Any]:
    return {
        "seq": p.seq,
        "fact_id": fact_id,
        "counts": dict(counts),
        "planner": list(p.planner),
        "records": {kind.attr: {"keys": list(getattr(p, kind.attr)),
                                "fields": kind.encode(getattr(p, kind.attr).values())} for kind in _KINDS},
        "indexes": {name: [k for part in p.parts.values() for k in getattr(part, name)] for name in _INDEXES},
        "host_event_seq": p.host_event_seq,
        "decisions": {"count": len(p.decisions), "fields": _DECISIONS.encode(p.decisions)},
        "item_decisions": _item_decisions(p),
        "budget_events": {"at": [t for t, _ in p.budget_events],
                          "event": _BUDGET_EVENTS.encode([e for _, e in p.budget_events])},
        "anomalies": list(p.anomalies),
    }


def _item_decisions(p: Projection) -> dict[str, Any]:
    """Each record once, and per item the index of each of its slots (-1 for none)."""
    records = p.item_decisions.records()
    at = {id(r): i for i, r in enumerate(records)}
    return {"items": list(p.item_decisions.items),
            "slots": [[at[id(r)] if r is not None else -1 for r in slots] for slots in p.item_decisions.items.values()],
            "count": len(records), "fields": _DECISIONS.encode(records)}


#: Records a provider has a part for once it has any of them (as a replay makes one).
_MOVING = ("orders", "requests", "instances", "grants")


def _part(lists: dict[str, list[tuple[int, str]]], instances: Mapping[str, InstanceRecord]) -> Part:
    """A provider's part from its share of the snapshot's keys (``Snapshot._by_owner``).

    Instance keys are the records' own strings, not the copies decoded with each index.
    """

    def keys(name: str, of_instances: bool = False) -> dict[str, None]:
        found = (k for _, k in lists.get(name, ()))
        return dict.fromkeys(instances[k].key for k in found) if of_instances else dict.fromkeys(found)

    part = Part(
        **{name: keys(name, _INDEXES[name] == "instances") for name in _INDEXES},
        requests=keys("requests"),
    )
    for k in part.live_instances:
        part.live_added(instances[k].state)
    return part


def _slots(data: Mapping[str, Any]) -> list[tuple[str, list[int]]]:
    n = int(data["count"])
    out = []
    for item, slots in zip(data["items"], data["slots"], strict=True):
        if len(slots) != 3 or not all(-1 <= int(i) < n for i in slots):
            raise ValueError(f"item_decisions: slots of {item!r} do not fit {n} records")
        out.append((str(item), [int(i) for i in slots]))
    return out


def decode(body: bytes) -> Snapshot:
    """A ``Snapshot`` from an ``encode``d body; ValueError (pydantic's included) when it does not fit."""
    rows: dict[str, dict[str, tuple[Any, ...]]] = {}
    try:
        with bulk():
            d = orjson.loads(body)
            for kind in _KINDS:
                keys = _PLAIN.decode(d["records"][kind.attr]["keys"])
                rows[kind.attr] = dict(zip(keys, kind.decode(d["records"][kind.attr]["fields"], len(keys))))
            events = d["budget_events"]
            snap = Snapshot(
                seq=int(d["seq"]),
                fact_id=str(d["fact_id"]),
                counts={str(k): int(v) for k, v in d["counts"].items()},
                planner=(str(d["planner"][0]), int(d["planner"][1])),
                rows=rows,
                indexes={name: _PLAIN.decode(d["indexes"][name]) for name in _INDEXES},
                host_event_seq={str(k): int(v) for k, v in d["host_event_seq"].items()},
                decisions=_DECISIONS.decode(d["decisions"]["fields"], int(d["decisions"]["count"])),
                item_slots=_slots(d["item_decisions"]),
                item_records=_DECISIONS.decode(d["item_decisions"]["fields"], int(d["item_decisions"]["count"])),
                budget_events=list(zip(_PLAIN.decode(events["at"]), _BUDGET_EVENTS.decode(events["event"]),
                                       strict=True)),
                anomalies=[str(a) for a in d["anomalies"]],
            )
            if any(row[_INSTANCE_KEY] != key for key, row in rows["instances"].items()):
                raise ValueError("an instance's key differs from the key it is stored under")
            for name, keys in snap.indexes.items():
                records = snap.rows[_INDEXES[name]]
                if not all(map(records.__contains__, keys)):
                    raise ValueError(f"{name} names records the snapshot does not hold")
            return snap
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc


class SnapshotStore:
    """One snapshot file per controller log, written atomically, read back only when it can be trusted."""

    def __init__(self, path: Path, quiet: bool = False) -> None:
        """``quiet``: say only what is wrong with the file (for a CLI view), not where a replay starts."""
        self.path = path
        self.quiet = quiet
        #: The file last loaded (mtime, size, inode, for which controller) and what came of it: the
        #: snapshot while someone still holds it, or None when it was ignored (and why was said once).
        self._seen: tuple[tuple[int, ...], weakref.ref[Snapshot] | None] | None = None

    @classmethod
    def for_controller(cls, home: Path, controller_url: str, quiet: bool = False) -> "SnapshotStore":
        """The store of one controller under a daemon's home; the file name hides the URL (it may carry credentials)."""
        digest = hashlib.sha256(controller_url.encode()).hexdigest()[:16]
        return cls(home / "snapshots" / f"{digest}.snapshot", quiet=quiet)

    # --- writing ---------------------------------------------------------------

    def write(self, body: bytes, seq: int, fact_id: str) -> int:
        """Replace the snapshot with ``body`` (``encode``d at ``seq``, whose fact is ``fact_id``); returns its size."""
        header = orjson.dumps({
            "format": FORMAT, "version": VERSION, "schema": SCHEMA, "seq": seq, "fact_id": fact_id,
            "length": len(body), "sha256": hashlib.sha256(body).hexdigest(),
        })
        private_dir(self.path.parent)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
                f.write(header + b"\n")
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._remove_leftovers()
        return len(header) + 1 + len(body)

    def _remove_leftovers(self) -> None:
        """Temporary files of writers that died mid-write (never read; removed once surely abandoned)."""
        for tmp in self.path.parent.glob(f"{self.path.name}.*.tmp"):
            try:
                if time.time() - tmp.stat().st_mtime > ABANDONED:
                    tmp.unlink()
            except OSError:
                pass

    # --- reading ---------------------------------------------------------------

    def seq(self) -> int:
        """The seq of the snapshot on disk, 0 when there is none or its header does not read."""
        try:
            with open(self.path, "rb") as f:
                return int(orjson.loads(f.readline())["seq"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def head(self) -> tuple[int, str] | None:
        """``(seq, fact_id)`` of the snapshot on disk, from its header alone; None when there is none that reads."""
        try:
            with open(self.path, "rb") as f:
                header = orjson.loads(f.readline())
            return int(header["seq"]), str(header["fact_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def load(self, controller: Controller) -> Snapshot | None:
        """The snapshot, when it belongs to this log and this code; None (and a warning why) otherwise.

        ``ControllerUnavailable`` passes through: whether the snapshot fits the
        log cannot be known without it.
        """
        try:
            st = self.path.stat()
            file = (st.st_mtime_ns, st.st_size, st.st_ino, id(controller))
            if self._seen is not None and self._seen[0] == file:
                if self._seen[1] is None:
                    return None
                known = self._seen[1]()
                if known is not None:
                    return known
            data = self.path.read_bytes()
        except FileNotFoundError:
            missing = (id(controller),)
            if self._seen != (missing, None) and not self.quiet:
                log.info("snapshot: none at %s; replaying the whole log", self.path)
                self._seen = (missing, None)
            return None
        except OSError as exc:
            return self._ignored(f"cannot read it: {exc.strerror}")
        snap = self._trusted(controller, data)
        self._seen = (file, None if snap is None else weakref.ref(snap))
        return snap

    def _trusted(self, controller: Controller, data: bytes) -> Snapshot | None:
        line, _, body = data.partition(b"\n")
        try:
            header = orjson.loads(line)
            fmt, version, schema = header["format"], header["version"], header["schema"]
            seq, fact_id = int(header["seq"]), str(header["fact_id"])
            length, digest = header["length"], header["sha256"]
        except (ValueError, KeyError, TypeError) as exc:
            return self._ignored(f"its header does not read ({exc})")
        if (fmt, version) != (FORMAT, VERSION):
            return self._ignored(f"format {fmt} {version}, expected {FORMAT} {VERSION}")
        if schema != SCHEMA:
            return self._ignored("written by another version of the projection code")
        if len(body) != length or hashlib.sha256(body).hexdigest() != digest:
            return self._ignored("damaged (its length or checksum does not match)")
        why = self._foreign(controller, seq, fact_id)
        if why:
            return self._ignored(why)
        try:
            snap = decode(body)
        except ValueError as exc:
            return self._ignored(f"its body does not decode ({' '.join(str(exc).split())[:200]})")
        if (snap.seq, snap.fact_id) != (seq, fact_id):
            return self._ignored("its body does not match its header")
        if not self.quiet:
            log.info("snapshot: loaded seq %d from %s; replaying the facts after it", seq, self.path)
        return snap

    @staticmethod
    def _foreign(controller: Controller, seq: int, fact_id: str) -> str:
        """Why the snapshot does not describe this log's first ``seq`` facts; empty when it does."""
        if seq == 0:
            return ""
        last = controller.last_seq()
        if seq > last:
            return f"it is ahead of the log (seq {seq}, the log ends at {last})"
        at = controller.read(after=seq - 1, limit=1)
        if not at or at[0].seq != seq or at[0].id != fact_id:
            return f"it was taken from another log (fact {seq} is not {fact_id})"
        return ""

    def _ignored(self, why: str) -> None:
        log.warning("snapshot: ignoring %s: %s; replaying the whole log", self.path, why)

