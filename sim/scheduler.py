"""A cluster scheduler, as far as the provisioner sees one: unmet need, hosts busy or idle, licenses in use.

The workload wants so many hosts (and license units) in total. The
scheduler keeps as many of the cluster's hosts busy as the work needs and
lets the rest go idle; what the work needs beyond the hosts it has is the
*unmet* need it publishes as demand (docs/scheduler-interface.md). ``use`` and
``license_use`` are that arithmetic; the demo workload (``sim.workload``)
and the simulator's ``Scheduler`` both use them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from messages.demand import DemandItem, DemandSnapshot, HostItem, UnitItem

H = TypeVar("H")


def use(wanted: int, hosts: Sequence[H]) -> tuple[list[H], list[H], int]:
    """The hosts kept busy (the first ``wanted``, in the order given), the spare ones, and the unmet need."""
    return list(hosts[:wanted]), list(hosts[wanted:]), max(0, wanted - len(hosts))


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


class Scheduler:
    """The simulated scheduler's state: the workload's wants and the hosts it runs work on.

    ``fits(item, host)`` says whether a host could do an item's work (its
    template matches the item), so an idle host serves another item before
    more are bought.
    """

    def __init__(self, fits: Callable[[HostItem, Host], bool]) -> None:
        self.fits = fits
        self.wanted: dict[str, DemandItem] = {}
        self.hosts: dict[str, Host] = {}
        self.seq = 0
        self.pushed: dict[str, int] | None = None
        #: The hosts oldest first, kept until one joins or leaves.
        self._oldest_first: list[Host] | None = None

    def want(self, item: DemandItem) -> None:
        self.wanted[item.id] = item

    def join(self, host: Host) -> None:
        self.hosts[host.key] = host
        self._oldest_first = None

    def leave(self, key: str) -> Host | None:
        self._oldest_first = None
        return self.hosts.pop(key, None)

    def assign(self) -> tuple[list[tuple[Host, str]], dict[str, int]]:
        """Put hosts to work: (host, "busy" or "idle") for each that changes, and each host item's unmet need.

        An item's own hosts serve it first, oldest first (the newest fall idle
        first); then idle hosts of other items take up what is still unmet,
        where their template fits.
        """
        if self._oldest_first is None:
            self._oldest_first = sorted(self.hosts.values(), key=lambda h: (h.joined_at, h.key))
        by_item: dict[str, list[Host]] = {}
        for h in self._oldest_first:
            by_item.setdefault(h.item, []).append(h)
        busy: set[str] = set()
        spare: list[Host] = []
        unmet: dict[str, int] = {}
        for item_id, item in self.wanted.items():
            if isinstance(item, HostItem):
                keep, rest, unmet[item_id] = use(item.count, by_item.pop(item_id, []))
                busy.update(h.key for h in keep)
                spare += rest
        for hosts in by_item.values():
            spare += hosts
        for item_id, short in unmet.items():
            item = self.wanted[item_id]
            while short > 0:
                h = next((h for h in spare if self.fits(item, h)), None)  # type: ignore[arg-type]
                if h is None:
                    break
                spare.remove(h)
                h.item = item_id
                busy.add(h.key)
                short -= 1
            unmet[item_id] = short
        changes = []
        for h in self.hosts.values():
            now_busy = h.key in busy
            if now_busy != h.busy:
                h.busy = now_busy
                changes.append((h, "busy" if now_busy else "idle"))
        return changes, unmet

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
        return DemandSnapshot(seq=self.seq, time=now, items=[
            item.model_copy(update={"count": need[item_id]}) for item_id, item in self.wanted.items()])

    def license_in_use(self, resource: str, total: int) -> int:
        return license_use(sum(i.count for i in self.wanted.values()
                               if isinstance(i, UnitItem) and i.resource == resource), total)[0]
