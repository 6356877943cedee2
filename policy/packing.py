"""Packing: new hosts, as cheap per hour as can be found quickly, that hold a round's unmet bundles.

A bundle item asks for ``count`` bundles, each needing some of a host's
numeric attributes (``ncpus: 2, mem: 8192``). ``pack`` chooses hosts of the
offered templates and says which bundles each carries, under these rules:

- **priority first**: an offer's tier (its provider's priority, then its
  template's) as for host items; bundles go to the highest tier of offers
  that can hold them, and only what that tier has no room for spills to the
  next. Within a tier the goal is the least cost per hour;
- **items**: bundles of one item may share a host; bundles of different
  items may share one unless either is ``exclusive``; a host only carries
  bundles of items whose ``select`` matches its template; when room is
  short, items of higher ``priority`` are packed first (their hosts then
  take in lower ones' bundles where they have space left);
- **room**: every host is taken from a ``Room`` (the template's
  ``max_number``, the provider's ``capacity``, and in a planning round the
  caps, rate limits and cooldowns of ``policy.sizing``); each template's
  host count is rounded up to its provider's granularity, and where the
  room does not allow that, hosts are dropped and their bundles packed
  elsewhere.

**Why this heuristic.** Bundles come in few shapes (a few dozen) but great
numbers, and templates in the thousands, so the packer works on shapes
(``_Class``: bundles alike in needs, select, exclusivity and priority), never
on single bundles, and its work grows with shapes x templates, not with the
bundle count. It is a greedy cover, the classic approximation for covering
at least cost:

1. each shape is given a value per bundle: what it costs alone on its
   cheapest template (hourly cost / bundles per host), so a host's worth is
   the standalone cost of what it carries;
2. for a template, one host's *pattern* is filled from the remaining
   bundles, a chunk at a time, always with the shape of most value per share
   of the host's *remaining* capacity in the dimension it uses most of, so
   a host short of memory takes CPU-heavy shapes next: hosts end up full in
   every dimension they have rather than in one. A second pattern starts
   with as many as fit of the shape worth most on the host alone (so a
   scarce dimension, a GPU, is not stranded by the mix), and the better wins;
3. the pattern of best value per cost over all templates is bought as many
   times as the remaining bundles repeat it (one choice buys a whole batch
   of identical hosts), and the search repeats. A template's last score is
   an upper bound of its next (fewer bundles remain, so a fill is worth no
   more), so a heap re-scores only the few templates that could win
   ("lazy greedy"); one round over 1,000 templates and 10,000 bundles of 25
   shapes fills a few thousand patterns, not millions;
4. a final pass moves each batch to the cheapest template of its tier that
   still holds its load, which right-sizes the last, partly filled hosts.

Near the end the remaining bundles are few, so full-host patterns lose to
small templates that hold them exactly: the tail is sized by the same rule.
``tests/bench_packing.py`` measures plans against the LP relaxation of the
problem (a lower bound of any packing): within a few per cent on cloud-like
catalogs.

Everything here is pure: no clock, no I/O; the ``Room`` says how many hosts
each offer may still take.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from messages.facts import Load, Order
from policy.catalog import Offer
from policy.granularity import size

#: Relative slack when comparing float amounts: 10 bundles of 0.1 CPU fit on 1 CPU.
EPS = 1e-9
#: What a free template costs in the arithmetic (value per cost must stay finite).
FREE = 1e-9
#: Templates named in the reason bundles were left unplaced (best ranked first); the rest are counted.
WHY = 3


@dataclass(frozen=True)
class Wish:
    """One bundle item's unmet bundles, and the offers whose templates its ``select`` matches."""

    item: str
    count: int
    resources: Mapping[str, float]
    offers: Sequence[Offer]
    exclusive: bool = False
    priority: int = 0


class Room(Protocol):
    """How many hosts each offer may still take; takes and gives back as the packer decides."""

    def room(self, offer: Offer) -> tuple[int, str]:
        """Most hosts ``offer`` may take now, and what limits it (the reason when that is 0)."""
        ...

    def take(self, offer: Offer, hosts: int) -> None: ...

    def give(self, offer: Offer, hosts: int) -> None:
        """Undo a take of ``hosts`` (the packer moved them to another template or dropped them)."""
        ...


class OfferRoom:
    """Room from the offers alone: each template's ``max_number`` and its provider's ``capacity``.

    ``held`` counts hosts already held or on their way per (provider,
    template); what a planning round adds (caps, rate limits, cooldowns) is
    ``policy.planning``'s room.
    """

    def __init__(self, held: Mapping[tuple[str, str], int] | None = None) -> None:
        self.held: dict[tuple[str, str], int] = dict(held or {})
        self.count: dict[str, int] = {}
        for (provider, _), n in self.held.items():
            self.count[provider] = self.count.get(provider, 0) + n

    def room(self, offer: Offer) -> tuple[int, str]:
        room = offer.max_number - self.held.get((offer.provider, offer.key), 0)
        if offer.capacity is not None:
            room = min(room, offer.capacity - self.count.get(offer.provider, 0))
        return max(0, room), f"capacity: room for {max(0, room)}"

    def take(self, offer: Offer, hosts: int) -> None:
        key = (offer.provider, offer.key)
        self.held[key] = self.held.get(key, 0) + hosts
        self.count[offer.provider] = self.count.get(offer.provider, 0) + hosts

    def give(self, offer: Offer, hosts: int) -> None:
        self.take(offer, -hosts)


@dataclass(frozen=True)
class Packed:
    """New hosts of one template, and the bundles they carry."""

    offer: Offer
    #: Hosts, on the provider's granularity; those beyond the loads' carry nothing.
    count: int
    #: Hosts grouped by what each carries, fullest first.
    loads: tuple[Load, ...]

    @property
    def bundles(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for load in self.loads:
            for item, n in load.bundles.items():
                out[item] = out.get(item, 0) + n * load.hosts
        return out

    @property
    def cost_per_hour(self) -> float:
        return self.count * self.offer.price


@dataclass(frozen=True)
class Unplaced:
    item: str
    count: int
    reason: str


@dataclass
class Packing:
    orders: list[Packed] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)
    #: Per item: (provider, reason) for providers with templates its select matches that carry
    #: none of its bundles for a reason other than price (too small, full, blocked), in rank order.
    rejected: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    @property
    def cost_per_hour(self) -> float:
        return sum(p.cost_per_hour for p in self.orders)

    def placed(self, item: str) -> int:
        return sum(p.bundles.get(item, 0) for p in self.orders)


def drop_hosts(order: Order, count: int) -> tuple[Order, dict[str, int]]:
    """A packed order cut to ``count`` hosts, and the bundles (per item) that lost their host.

    Whole hosts go, never part of one: first those that carry nothing (from
    rounding up to granularity), then the least loaded, last in ``loads``.
    """
    empty = order.count - sum(ld.hosts for ld in order.loads or ())
    cut = max(0, order.count - count - max(0, empty))
    loads = [ld.model_copy() for ld in order.loads or ()]
    dropped: dict[str, int] = {}
    while cut > 0 and loads:
        last = loads[-1]
        k = min(cut, last.hosts)
        for item, n in last.bundles.items():
            dropped[item] = dropped.get(item, 0) + n * k
        cut -= k
        if k == last.hosts:
            loads.pop()
        else:
            loads[-1] = last.model_copy(update={"hosts": last.hosts - k})
    return order.model_copy(update={"count": count, "loads": loads}), dropped


# --- the shapes, the templates, and the hosts bought ------------------------------------------


@dataclass(eq=False)
class _Class:
    """Bundles alike in what they need, where they may go, and with whom they may share."""

    need: tuple[float, ...]
    #: "" for bundles that share hosts with other items' bundles, else the item id (exclusive).
    pool: str
    priority: int
    #: Offer indices whose templates the items' select matches.
    matching: frozenset[int]
    #: (item, bundles not yet given to a host), in the order of the wishes.
    members: list[list]
    left: int = 0
    #: Offer index -> bundles of this class one host holds (fitting offers only).
    fit: dict[int, int] = field(default_factory=dict)
    #: Standalone cost of one bundle in the tier being packed: the value a host carrying it earns.
    value: float = 0.0


@dataclass(frozen=True, eq=False)
class _Template:
    index: int
    offer: Offer
    cap: tuple[float, ...]
    cost: float


@dataclass(eq=False)
class _Batch:
    """``hosts`` identical hosts of one template, each carrying ``pattern`` (class -> bundles)."""

    template: _Template
    hosts: int
    pattern: dict[_Class, int]

    def load(self, dims: int) -> list[float]:
        used = [0.0] * dims
        for c, n in self.pattern.items():
            for r in range(dims):
                used[r] += c.need[r] * n
        return used


def _numeric(value: object) -> float:
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _fits_count(need: tuple[float, ...], free: Sequence[float]) -> int:
    """How many bundles needing ``need`` fit in ``free`` (large when it needs nothing measurable)."""
    best = 1 << 30
    for r, d in enumerate(need):
        if d > 0:
            n = int(free[r] / d + EPS)
            if n < best:
                best = n
    return best


def pack(wishes: Sequence[Wish], room: Room | None = None) -> Packing:
    """Hosts for the wishes' bundles, and what could not be placed and why (see the module's doc)."""
    return _Packer(wishes, room if room is not None else OfferRoom()).run()


class _Packer:
    def __init__(self, wishes: Sequence[Wish], room: Room) -> None:
        self.wishes = [w for w in wishes if w.count > 0]
        self.roomy = room
        self.dims = sorted({r for w in self.wishes for r in w.resources})
        self.templates: list[_Template] = []
        self.index: dict[tuple[str, str], int] = {}
        self.classes: list[_Class] = []
        self.batches: list[_Batch] = []
        #: Offers found with no room (or blocked), and why.
        self.full: dict[int, str] = {}
        #: Offers that may take no more hosts this round (dropped for granularity).
        self.closed: set[int] = set()
        self._build()

    # --- inputs -----------------------------------------------------------------------------

    def _build(self) -> None:
        dims = self.dims
        by_offers: dict[int, frozenset[int]] = {}
        classes: dict[tuple, _Class] = {}
        for w in self.wishes:
            matching = by_offers.get(id(w.offers))
            if matching is None:
                idx = []
                for offer in w.offers:
                    key = (offer.provider, offer.key)
                    i = self.index.get(key)
                    if i is None:
                        i = self.index[key] = len(self.templates)
                        cap = tuple(_numeric(offer.attributes.get(r)) for r in dims)
                        self.templates.append(_Template(i, offer, cap, max(offer.price, FREE)))
                    idx.append(i)
                matching = by_offers[id(w.offers)] = frozenset(idx)
            need = tuple(float(w.resources.get(r, 0.0)) for r in dims)
            pool = w.item if w.exclusive else ""
            shape = (need, pool, w.priority, matching)
            c = classes.get(shape)
            if c is None:
                c = classes[shape] = _Class(need=need, pool=pool, priority=w.priority, matching=matching, members=[])
                for i in matching:
                    n = _fits_count(need, self.templates[i].cap)
                    if n > 0:
                        c.fit[i] = n
            c.members.append([w.item, w.count])
            c.left += w.count
        self.classes = list(classes.values())

    def _room(self, t: _Template) -> int:
        if t.index in self.closed:
            return 0
        n, why = self.roomy.room(t.offer)
        if n <= 0:
            self.full[t.index] = why
        return n

    # --- the search -------------------------------------------------------------------------

    def run(self) -> Packing:
        levels = sorted({c.priority for c in self.classes}, reverse=True)
        for level in levels:
            classes = [c for c in self.classes if c.priority == level and c.fit]
            if level != levels[0]:
                self._top_up([c for c in classes if not c.pool])
            tiers = sorted({self.templates[i].offer.tier for c in classes for i in c.fit}, reverse=True)
            for tier in tiers:
                while self._tier(classes, tier):
                    pass
        return self._result()

    def _tier(self, classes: list[_Class], tier: tuple[int, int]) -> bool:
        """Packs what it can of ``classes`` into the tier's templates; True if granularity undid some of it."""
        live = [c for c in classes if c.left > 0 and any(
            self.templates[i].offer.tier == tier and i not in self.closed for i in c.fit)]
        if not live:
            return False
        rooms: dict[int, int] = {}

        def roomy(i: int) -> bool:
            if i not in rooms:
                rooms[i] = self._room(self.templates[i])
            return rooms[i] > 0

        for c in live:
            costs = [self.templates[i].cost / n for i, n in c.fit.items()
                     if self.templates[i].offer.tier == tier and roomy(i)]
            c.value = min(costs) if costs else 0.0
        live = [c for c in live if c.value > 0]
        pools: dict[str, list[_Class]] = {}
        for c in live:
            pools.setdefault(c.pool, []).append(c)
        first = len(self.batches)
        for members in pools.values():
            self._greedy(members, tier, rooms)
        self._downsize(self.batches[first:], tier)
        return self._granularity(tier)

    def _greedy(self, classes: list[_Class], tier: tuple[int, int], rooms: dict[int, int]) -> None:
        """Buys batches of the best pattern by value per cost until the classes are placed or nothing fits."""
        by_template: dict[int, list[_Class]] = {}
        for c in classes:
            for i in c.fit:
                if rooms.get(i, 0) > 0 and self.templates[i].offer.tier == tier:
                    by_template.setdefault(i, []).append(c)
        version = 0
        heap: list[tuple[float, int, int, dict[_Class, int]]] = []
        for i, members in by_template.items():
            t = self.templates[i]
            pattern, worth = self._fill(t.cap, members, i)
            if worth > 0:
                heap.append((-worth / t.cost, i, version, pattern))
        heapq.heapify(heap)
        while heap:
            key, i, seen, pattern = heapq.heappop(heap)
            t = self.templates[i]
            if seen != version:
                pattern, worth = self._fill(t.cap, by_template[i], i)
                if worth <= 0:
                    continue
                key = -worth / t.cost
                if heap and key > heap[0][0]:  # another template may now do better: look at it first
                    heapq.heappush(heap, (key, i, version, pattern))
                    continue
            n = self._room(t)
            if n <= 0:
                continue
            for c, k in pattern.items():
                n = min(n, c.left // k)
            self.roomy.take(t.offer, n)
            self.batches.append(_Batch(t, n, pattern))
            for c, k in pattern.items():
                c.left -= n * k
            version += 1
            heapq.heappush(heap, (key, i, -1, pattern))

    def _fill(self, cap: Sequence[float], classes: Sequence[_Class],
              template: int | None = None) -> tuple[dict[_Class, int], float]:
        """One host's pattern from the remaining bundles, and its worth (the bundles' standalone cost).

        A chunk at a time (half of what still fits), always of the shape with
        most value per share of the *remaining* capacity in the dimension it
        uses most of: shares grow as a dimension fills, so the next chunks
        come from shapes that use the others. Such a mix can strand a scarce
        dimension (a GPU) that one shape alone would use fully, so a whole
        ``template`` is also filled first with as many as fit of the shape
        worth most there alone, the rest mixed in after; the better pattern wins.
        """
        pattern, worth = self._mix(cap, classes, {})
        if template is not None:
            best, most = None, 0.0
            for c in classes:
                n = min(c.fit[template], c.left)
                if n > 0 and n * c.value > most:
                    best, most = c, n * c.value
            if best is not None and most > 0:
                alone, alone_worth = self._mix(cap, classes, {best: min(best.fit[template], best.left)})
                if alone_worth > worth + EPS:
                    pattern, worth = alone, alone_worth
        return pattern, worth

    def _mix(self, cap: Sequence[float], classes: Sequence[_Class],
             start: dict[_Class, int]) -> tuple[dict[_Class, int], float]:
        free = list(cap)
        pattern = dict(start)
        worth = 0.0
        dims = range(len(free))
        for c, n in start.items():
            worth += n * c.value
            for r in dims:
                free[r] -= n * c.need[r]
        while True:
            best: _Class | None = None
            best_density = 0.0
            best_fit = 0
            for c in classes:
                left = c.left - pattern.get(c, 0)
                if left <= 0:
                    continue
                share = 0.0
                fit = left
                need = c.need
                for r in dims:
                    d = need[r]
                    if d > 0:
                        f = free[r]
                        if d > f + EPS * (1.0 + f):
                            fit = 0
                            break
                        s = d / f if f > 0 else 1.0
                        if s > share:
                            share = s
                        n = int(f / d + EPS)
                        if n < fit:
                            fit = n
                if fit <= 0:
                    continue
                density = c.value / share if share > 0 else math.inf
                if density > best_density:
                    best, best_density, best_fit = c, density, fit
            if best is None:
                return pattern, worth
            n = best_fit if best_fit <= 2 else (best_fit + 1) // 2
            pattern[best] = pattern.get(best, 0) + n
            worth += n * best.value
            for r in dims:
                free[r] -= n * best.need[r]

    def _downsize(self, batches: Sequence[_Batch], tier: tuple[int, int]) -> None:
        """Moves each batch to the cheapest template of the tier that still holds its load."""
        if not batches:
            return
        dims = len(self.dims)
        tier_templates = sorted((t for t in self.templates if t.offer.tier == tier and t.index not in self.closed),
                                key=lambda t: (t.cost, t.offer.rank))
        for b in list(batches):
            load = b.load(dims)
            classes = list(b.pattern)
            for t in tier_templates:
                if t.cost >= b.template.cost or b.hosts == 0:
                    break
                if any(t.index not in c.fit for c in classes):
                    continue
                if any(load[r] > t.cap[r] + EPS * (1.0 + t.cap[r]) for r in range(dims)):
                    continue
                n = min(b.hosts, self._room(t))
                if n <= 0:
                    continue
                self.roomy.give(b.template.offer, n)
                self.roomy.take(t.offer, n)
                self.full.pop(b.template.index, None)
                if n == b.hosts:
                    b.template = t
                    break
                b.hosts -= n
                self.batches.append(_Batch(t, n, dict(b.pattern)))

    def _granularity(self, tier: tuple[int, int]) -> bool:
        """Rounds each template's hosts up to its provider's granularity; where the room does not
        allow it, drops the least loaded hosts back to the remaining bundles. True if any were dropped."""
        counts: dict[int, int] = {}
        for b in self.batches:
            if b.template.offer.tier == tier and b.hosts > 0:
                counts[b.template.index] = counts.get(b.template.index, 0) + b.hosts
        dropped = False
        for i, n in counts.items():
            offer = self.templates[i].offer
            if offer.min_request <= 1 and offer.step <= 1:
                continue
            free, _ = self.roomy.room(offer)
            want = size(n, n + free, offer.min_request, offer.step)
            if want >= n:
                if want > n:
                    self.roomy.take(offer, want - n)
                    self.batches.append(_Batch(self.templates[i], want - n, {}))
                continue
            dropped = True
            self.closed.add(i)
            cut = n - want
            # The hosts this level added go first (a level's count was on the granularity when it
            # ended, so they are enough): a host carrying an item of higher priority, whose level is
            # done, would leave its bundles with nowhere to go. Then the least loaded.
            mine = sorted((b for b in self.batches if b.template.index == i and b.hosts > 0),
                          key=lambda b: (max((c.priority for c in b.pattern), default=-1 << 30),
                                         sum(b.pattern.values())))
            for b in mine:
                k = min(cut, b.hosts)
                b.hosts -= k
                cut -= k
                for c, per in b.pattern.items():
                    c.left += k * per
                self.roomy.give(offer, k)
                if cut == 0:
                    break
            self.full[i] = (f"granularity: takes {offer.min_request}, then steps of {offer.step}; "
                            f"room for {n + free}")
        self.batches = [b for b in self.batches if b.hosts > 0]
        return dropped

    def _top_up(self, classes: list[_Class]) -> None:
        """Lower-priority bundles first fill the space left on hosts bought for higher ones."""
        if not classes:
            return
        for c in classes:
            costs = [self.templates[i].cost / n for i, n in c.fit.items()]
            c.value = min(costs) if costs else 0.0
        dims = len(self.dims)
        for b in list(self.batches):
            if any(c.pool for c in b.pattern):
                continue
            members = [c for c in classes if b.template.index in c.fit]
            while b.hosts > 0 and members:
                load = b.load(dims)
                free = [b.template.cap[r] - load[r] for r in range(dims)]
                extra, worth = self._fill(free, members)
                if worth <= 0:
                    break
                q = b.hosts
                for c, k in extra.items():
                    q = min(q, c.left // k)
                for c, k in extra.items():
                    c.left -= q * k
                pattern = dict(b.pattern)
                for c, k in extra.items():
                    pattern[c] = pattern.get(c, 0) + k
                if q == b.hosts:
                    b.pattern = pattern
                    break
                self.batches.append(_Batch(b.template, q, pattern))
                b.hosts -= q

    # --- the answer -------------------------------------------------------------------------

    def _result(self) -> Packing:
        out = Packing()
        # Bundles go to items in wish order within each class; each batch is split where the
        # items change, so every load says exactly whose bundles its hosts carry.
        queues = {id(c): [[item, n] for item, n in c.members] for c in self.classes}
        per_template: dict[int, list[tuple[int, dict[str, int]]]] = {}
        order: list[int] = []
        fullest = sorted(self.batches, key=lambda b: -sum(b.pattern.values()))
        for b in fullest:
            i = b.template.index
            if i not in per_template:
                per_template[i] = []
                order.append(i)
            hosts = b.hosts
            while hosts > 0:
                if not b.pattern:
                    per_template[i].append((hosts, {}))
                    break
                # Hosts whose bundles all come from each class's current item.
                q = hosts
                for c, k in b.pattern.items():
                    q = min(q, queues[id(c)][0][1] // k)
                q = max(q, 1)
                load: dict[str, int] = {}
                for c, k in b.pattern.items():
                    queue = queues[id(c)]
                    want = k * q
                    while want > 0:
                        head = queue[0]
                        n = min(want, head[1] if q == 1 else want)
                        load[head[0]] = load.get(head[0], 0) + n // q
                        head[1] -= n
                        want -= n
                        if head[1] == 0:
                            queue.pop(0)
                per_template[i].append((q, load))
                hosts -= q
        for i in order:
            t = self.templates[i]
            merged: dict[tuple, int] = {}
            for hosts, load in per_template[i]:
                key = tuple(sorted(load.items()))
                merged[key] = merged.get(key, 0) + hosts
            count = sum(merged.values())
            loads = tuple(Load(hosts=h, bundles=dict(key))
                          for key, h in sorted(merged.items(), key=lambda kv: -sum(n for _, n in kv[0])) if key)
            out.orders.append(Packed(offer=t.offer, count=count, loads=loads))
        out.orders.sort(key=lambda p: p.offer.rank)
        self._unplaced(out, queues)
        self._rejections(out)
        return out

    def _unplaced(self, out: Packing, queues: dict[int, list[list]]) -> None:
        left: dict[str, tuple[int, str]] = {}
        for c in self.classes:
            for item, n in queues[id(c)]:
                if n <= 0:
                    continue
                count, _ = left.get(item, (0, ""))
                left[item] = (count + n, self._why(c))
        for w in self.wishes:
            if w.item in left:
                count, why = left[w.item]
                out.unplaced.append(Unplaced(item=w.item, count=count, reason=why))

    def _why(self, c: _Class) -> str:
        if not c.matching:
            return "mismatch: no template matches its select"
        if not c.fit:
            needs = ", ".join(f"{r} {_amount(d)}" for r, d in zip(self.dims, c.need) if d > 0)
            return f"too small: no template it selects holds one bundle ({needs})"
        full = [i for i in sorted(c.fit, key=lambda i: self.templates[i].offer.rank) if i in self.full]
        if not full:
            return "no room left on the templates that hold it"
        said = [f"{self.templates[i].offer.provider} {self.templates[i].offer.key}: {self.full[i]}"
                for i in full[:WHY]]
        more = f"; {len(full) - WHY} more" if len(full) > WHY else ""
        return "no room: " + "; ".join(said) + more

    def _rejections(self, out: Packing) -> None:
        carried: dict[str, set[str]] = {}
        for p in out.orders:
            for item in p.bundles:
                carried.setdefault(item, set()).add(p.offer.provider)
        for w in self.wishes:
            said: dict[str, str] = {}
            fits_somewhere: set[str] = set()
            classes = [c for c in self.classes if any(m[0] == w.item for m in c.members)]
            for offer in w.offers:
                i = self.index[(offer.provider, offer.key)]
                if any(i in c.fit for c in classes):
                    fits_somewhere.add(offer.provider)
                    if i in self.full and offer.provider not in said:
                        said[offer.provider] = self.full[i]
            rejected = []
            seen: set[str] = set()
            for offer in w.offers:
                name = offer.provider
                if name in seen or name in carried.get(w.item, ()):
                    continue
                seen.add(name)
                if name not in fits_somewhere:
                    rejected.append((name, "too small: no template holds one bundle"))
                elif name in said:
                    rejected.append((name, said[name]))
            out.rejected[w.item] = rejected


def _amount(x: float) -> str:
    return f"{x:g}"
