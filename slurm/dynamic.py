"""Dynamic nodes: Slurm's pending jobs as the daemon's demand, in bundles the planner packs into hosts.

Each pending job of a configured partition asks for some nodes, each with
some CPUs and memory, maybe with features (``--constraint``): one bundle per
node it asks for, of ``{ncpus, mem}`` (MB), with the features as selectors
on the templates' attributes. Jobs of one partition asking alike share one
item, so a thousand array tasks are one item of a thousand bundles. The
planner packs them into hosts of the templates that fit (``policy.packing``),
less what is on its way already.

Only ``PENDING`` jobs count (22.05's ``squeue --json`` lists finished ones
too), and of those not the jobs that wait for something hosts do not bring:
held, a dependency, a begin time, licenses, an account's or QOS's limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

from messages.demand import BundleItem, DemandSnapshot

#: Why a pending job may wait that more hosts do not change: held, waiting on another job, a time, licenses,
#: a limit of its account or QOS, a reservation (prefixes: ``AssocGrpCpuLimit``, ``QOSMaxNodePerJobLimit`` ...).
WAITS_FOR_OTHER = ("Dependency", "DependencyNeverSatisfied", "JobHeld", "BeginTime", "Licenses", "Assoc", "QOS",
                   "Reservation", "InvalidAccount", "InvalidQOS", "AccountNotAllowed")
#: Features a constraint may combine with ``&`` (all of them); ``|``, counts and brackets are not selectors.
_FEATURE = re.compile(r"^[A-Za-z0-9_.-]+$")


class Job(Protocol):
    """What demand reads of one of Slurm's jobs (``slurm.formats``)."""

    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def node_count(self) -> int: ...
    @property
    def cpus_per_node(self) -> int: ...
    @property
    def memory_per_node(self) -> int | None: ...
    @property
    def features(self) -> str: ...


def features_select(constraint: str) -> dict[str, str] | None:
    """``a&b`` -> ``{a: "true", b: "true"}`` (each feature a boolean template attribute); None for a constraint
    selectors cannot say (``a|b``, ``a*2``, ``[a|b]``)."""
    if not constraint:
        return {}
    parts = constraint.split("&")
    if not all(_FEATURE.match(p) for p in parts):
        return None
    return {p: "true" for p in parts}


def demand(jobs: Iterable[Job], partitions: Iterable[str]) -> tuple[DemandSnapshot, list[str]]:
    """The demand snapshot of the pending jobs of ``partitions``, and what could not be said (for the log)."""
    wanted = set(partitions)
    counts: dict[tuple[str, int, int, tuple[tuple[str, str], ...]], int] = {}
    skipped: list[str] = []
    for job in jobs:
        if job.state != "PENDING" or job.partition not in wanted or job.reason.startswith(WAITS_FOR_OTHER):
            continue
        select = features_select(job.features)
        if select is None:
            skipped.append(f"a job of partition {job.partition} asks for features {job.features!r}, which no "
                           "selector can say: left out of the demand")
            continue
        key = (job.partition, max(1, job.cpus_per_node), job.memory_per_node or 0, tuple(sorted(select.items())))
        counts[key] = counts.get(key, 0) + max(1, job.node_count)
    items = []
    for (partition, cpus, mem, select), n in sorted(counts.items()):
        shape = f"{cpus}c" + (f"{mem}m" if mem else "") + "".join(f"-{k}" for k, _ in select)
        resources: dict[str, int | float] = {"ncpus": cpus}
        if mem:
            resources["mem"] = mem
        items.append(BundleItem(id=f"slurm-{partition}-{shape}", count=n, resources=resources,
                                select=dict(select)))
    return DemandSnapshot(items=items), skipped
