"""A cluster scheduler, as far as the provisioner sees one: unmet need, hosts busy or idle, licenses in use.

The workload wants so many hosts (and license units) in total. The
scheduler keeps as many of the cluster's hosts busy as the work needs and
lets the rest go idle; what the work needs beyond the hosts it has is the
*unmet* need it publishes as demand (docs/scheduler-interface.md). ``use`` and
``license_use`` are that arithmetic; the demo workload (``sim.workload``)
and the simulator's ``Scheduler`` both use them (``assign`` takes ``use``'s
slices inline, from the hosts' keys it keeps per item).

Bundle items want so many bundles running, each needing some of a host's
resources (``ncpus: 2, mem: 8192``). The scheduler places them on the
hosts no host item keeps busy, oldest host first: on a host bought for
bundles, first the bundles the planner packed onto it (``Host.plan``, as a
scheduler told which pending work each new node was bought for would),
then, on whatever room is left anywhere, the rest, the items a host could
run taking turns (higher ``priority`` first), within each host's resources
and respecting ``select`` and ``exclusive``. Bundles that find no room are
the item's unmet need. How well the hosts end up used is what the
simulator's packing efficiency measures (``Packing``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal, TypeVar

from messages.base import copied, made
from messages.demand import BundleItem, DemandItem, DemandSnapshot, HostItem, UnitItem

H = TypeVar("H")


def use(wanted: int, hosts: Sequence[H]) -> tuple[list[H], list[H], int]:
    """The hosts kept busy (the first ``wanted``, in the order given), the spare ones, and the unmet need."""
    return list(hosts[:wanted]), list(hosts[wanted:]), max(0, wanted - len(hosts))


def _but_count(item: DemandItem) -> dict:
    """An item's fields but its count."""
    return {**item.__dict__, "count": 0}


def license_use(wanted: int, total: int) -> tuple[int, int]:
    """Units in use of a license whose cluster total is ``total``, and the unmet need."""
    return min(wanted, total), max(0, wanted - total)


@dataclass
class Host:
    key: str
    name: str
    provider: str
    template: str | None
    #: The demand item whose work it does (it was ordered for it, or took over an idle one).
    item: str
    joined_at: float
    busy: bool = False
    #: Bundles it runs now, per bundle item.
    bundles: dict[str, int] = field(default_factory=dict)
    #: The bundles the planner packed onto it, per item, when it was bought for bundles.
    plan: dict[str, int] = field(default_factory=dict)


#: Relative slack when comparing amounts (10 bundles of 0.1 CPU fit on 1 CPU).
EPS = 1e-9
#: Oldest first: when a host joined, then its key.
_AGE = attrgetter("joined_at", "key")


@dataclass(frozen=True)
class Packing:
    """Resources of the bundle hosts, and what the bundles running on them use.

    Per resource the bundle items name (``ncpus``, ``mem`` ...): ``allocated``
    is the sum over those hosts of what each has, ``used`` the sum over the
    bundles running of what each needs.
    """

    allocated: Mapping[str, float] = field(default_factory=dict)
    used: Mapping[str, float] = field(default_factory=dict)


def _room(need: list[float], free: list[float]) -> int:
    """How many bundles needing ``need`` fit in ``free``."""
    return max(0, min((int(f / d + EPS) for f, d in zip(free, need) if d > 0), default=0))


class Scheduler:
    """The simulated scheduler's state: the workload's wants and the hosts it runs work on.

    ``fits(item, host)`` says whether a host could do an item's work (its
    template matches the item's selector), so an idle host serves another
    item before more are bought. ``capacity(host)`` is what a host has of
    each numeric attribute of its template, for bundles to take.
    """

    def __init__(self, fits: Callable[[HostItem | BundleItem, Host], bool],
                 capacity: Callable[[Host], Mapping[str, float]] = lambda host: {}) -> None:
        self.fits = fits
        self.capacity = capacity
        self.wanted: dict[str, DemandItem] = {}
        self.hosts: dict[str, Host] = {}
        self.seq = 0
        self.pushed: dict[str, int] | None = None
        #: The hosts oldest first, kept until one joins or leaves.
        self._oldest_first: list[Host] | None = None
        #: The same hosts grouped by the item they work for (each group oldest first, groups in the order
        #: their first host comes), kept until a host joins, leaves or takes up another item.
        self._by_item: dict[str, list[Host]] | None = None
        self._keys_by_item: dict[str, list[str]] = {}
        #: Each host's place in ``hosts`` (the order ``assign`` reports changes in), and the keys of those busy.
        self._place_of: dict[str, int] = {}
        self._joins = 0
        self._busy: set[str] = set()
        #: What the last ``assign`` left the bundle hosts holding and using.
        self.packing = Packing()
        #: Per license: the units the work wants, summed over its items (kept until an item changes).
        self._units: dict[str, int] | None = None
        #: Per item: the item last published, with its count then and the copy that said it.
        self._copies: dict[str, tuple[DemandItem, int, DemandItem]] = {}

    def want(self, item: DemandItem) -> None:
        self.wanted[item.id] = item
        self._units = None

    def join(self, host: Host) -> None:
        self.hosts[host.key] = host
        self._oldest_first = self._by_item = None
        if host.key not in self._place_of:  # a host joining again under its key keeps its place, as in a dict
            self._joins += 1
            self._place_of[host.key] = self._joins
        self._busy.discard(host.key)
        if host.busy:
            self._busy.add(host.key)

    def leave(self, key: str) -> Host | None:
        host = self.hosts.pop(key, None)
        if host is not None:  # a host the cluster never had leaves nothing to redo
            self._oldest_first = self._by_item = None
            self._busy.discard(key)
            del self._place_of[key]
        return host

    def assign(self) -> tuple[list[tuple[Host, Literal["idle", "busy"]]], dict[str, int]]:
        """Put hosts to work: (host, "busy" or "idle") for each that changes, and each host
        and bundle item's unmet need.

        A host item's own hosts serve it first, oldest first (the newest fall
        idle first); the hosts left over run bundles (``_place``); then hosts
        running nothing take up what host items still lack, where their
        template fits.
        """
        if self._oldest_first is None:
            self._oldest_first = sorted(self.hosts.values(), key=_AGE)
        if self._by_item is None:
            self._by_item = {}
            for h in self._oldest_first:
                self._by_item.setdefault(h.item, []).append(h)
            self._keys_by_item = {item_id: [h.key for h in hosts] for item_id, hosts in self._by_item.items()}
        groups, keys = self._by_item, self._keys_by_item
        busy: set[str] = set()
        spare: list[Host] = []
        unmet: dict[str, int] = {}
        served: set[str] = set()
        for item_id, item in self.wanted.items():
            if isinstance(item, HostItem):
                hosts = groups.get(item_id)
                if hosts is None:
                    unmet[item_id] = max(0, item.count)
                    continue
                served.add(item_id)
                n = item.count
                unmet[item_id] = max(0, n - len(hosts))  # as ``use`` counts it: the first n are kept
                busy.update(keys[item_id][:n])
                spare += hosts[n:]
        for item_id, hosts in groups.items():
            if item_id not in served:
                spare += hosts
        bundled = [i for i in self.wanted.values() if isinstance(i, BundleItem)]
        if bundled:
            for h in self.hosts.values():
                h.bundles = {}
            unmet.update(self._place(bundled, sorted(spare, key=lambda h: (h.joined_at, h.key))))
            busy.update(h.key for h in spare if h.bundles)
            spare = [h for h in spare if not h.bundles]
        for item_id, short in list(unmet.items()):
            if not isinstance(self.wanted[item_id], HostItem):
                continue
            item = self.wanted[item_id]
            while short > 0:
                host = next((h for h in spare if self.fits(item, h)), None)  # type: ignore[arg-type]
                if host is None:
                    break
                spare.remove(host)
                host.item = item_id
                self._by_item = None
                busy.add(host.key)
                short -= 1
            unmet[item_id] = short
        if bundled:
            self.packing = self._packing(bundled, busy)
        # Only the hosts whose state flips are looked at, in the order they joined (the order of ``hosts``).
        flipped = sorted(busy.symmetric_difference(self._busy), key=self._place_of.__getitem__)
        self._busy = busy
        changes: list[tuple[Host, Literal["idle", "busy"]]] = []
        for key in flipped:
            h = self.hosts[key]
            h.busy = not h.busy
            changes.append((h, "busy" if h.busy else "idle"))
        return changes, unmet

    def _place(self, items: list[BundleItem], hosts: list[Host]) -> dict[str, int]:
        """Runs the items' bundles on ``hosts`` (oldest first); returns each item's bundles left without room.

        On each host the items it could run take turns, higher priority
        first, each placing up to its share of what still fits, until nothing
        more fits: hosts end up running a mix, as the planner packed them,
        without the scheduler knowing which host was bought for what.
        """
        order = sorted(items, key=lambda i: -i.priority)  # stable: the trace's order within a priority
        by_id = {i.id: i for i in order}
        left = {i.id: i.count for i in order}
        dims = sorted({r for i in order for r in i.resources})
        needs = {i.id: [float(i.resources.get(r, 0.0)) for r in dims] for i in order}
        free: dict[str, list[float]] = {}
        for h in hosts:
            cap = self.capacity(h)
            free[h.key] = [float(cap.get(r, 0.0)) for r in dims]
            for item_id, n in h.plan.items():
                i = by_id.get(item_id)
                if i is not None and self._may_run(i, h):
                    self._run(h, i, min(n, left[item_id], _room(needs[item_id], free[h.key])), free[h.key],
                              needs[item_id], left)
        for h in hosts:
            able = [i for i in order if left[i.id] > 0 and self.fits(i, h)]
            while able:
                placed = False
                for i in list(able):
                    room = _room(needs[i.id], free[h.key]) if self._may_run(i, h) else 0
                    n = min(left[i.id], max(1, room // len(able)) if room else 0)
                    if n <= 0:
                        able.remove(i)
                        continue
                    self._run(h, i, n, free[h.key], needs[i.id], left)
                    placed = True
                    if left[i.id] == 0:
                        able.remove(i)
                if not placed:
                    break
        return left

    def _may_run(self, item: BundleItem, h: Host) -> bool:
        """Whether ``item``'s bundles may join what ``h`` runs: an exclusive item's share a host with no other."""
        if item.exclusive:
            return all(k == item.id for k in h.bundles)
        return not any(self.wanted[k].exclusive for k in h.bundles)  # type: ignore[union-attr]

    @staticmethod
    def _run(h: Host, item: BundleItem, n: int, free: list[float], need: list[float], left: dict[str, int]) -> None:
        if n <= 0:
            return
        h.bundles[item.id] = h.bundles.get(item.id, 0) + n
        left[item.id] -= n
        for r, d in enumerate(need):
            free[r] -= n * d

    def _packing(self, items: list[BundleItem], busy: set[str]) -> Packing:
        """What the bundle hosts hold, and what the bundles on them use.

        Bundle hosts: those running bundles, and those bought for bundles
        (packed orders name no item) that run nothing now. A host item's
        host running nothing is that item's idle host, not counted here.
        """
        dims = sorted({r for i in items for r in i.resources})
        allocated = dict.fromkeys(dims, 0.0)
        used = dict.fromkeys(dims, 0.0)
        for h in self.hosts.values():
            if not h.bundles and (h.item or h.key in busy):
                continue
            cap = self.capacity(h)
            for r in dims:
                allocated[r] += float(cap.get(r, 0.0))
            for item_id, n in h.bundles.items():
                for r, d in self.wanted[item_id].resources.items():  # type: ignore[union-attr]
                    used[r] += n * d
        return Packing(allocated=allocated, used=used)

    def demand(self, host_unmet: dict[str, int], totals: dict[str, int], now: float) -> DemandSnapshot | None:
        """The snapshot to push when the unmet need changed, else None; ``totals`` per license."""
        need = dict(host_unmet)
        for item_id, item in self.wanted.items():
            if isinstance(item, UnitItem):
                need[item_id] = license_use(item.count, totals.get(item.resource, 0))[1]
        if need == self.pushed:
            return None
        self.pushed = need
        self.seq += 1
        # Made, not validated: its items are (validated) models, one per id of ``wanted``.
        return made(DemandSnapshot, seq=self.seq, items=[
            self._published(item, need[item_id]) for item_id, item in self.wanted.items()], time=now)

    def _published(self, item: DemandItem, count: int) -> DemandItem:
        """``item`` with its unmet ``count``: the copy made for the last snapshot while that says the same
        (items are frozen; most snapshots change one item's count, and the workload's count of an item
        changes more often than its unmet count)."""
        last = self._copies.get(item.id)
        if last is not None and last[1] == count and (last[0] is item or _but_count(last[0]) == _but_count(item)):
            return last[2]
        copy = copied(item, count=count)
        self._copies[item.id] = (item, count, copy)
        return copy

    def license_in_use(self, resource: str, total: int) -> int:
        if self._units is None:
            self._units = {}
            for i in self.wanted.values():
                if isinstance(i, UnitItem):
                    self._units[i.resource] = self._units.get(i.resource, 0) + i.count
        return license_use(self._units.get(resource, 0), total)[0]
