"""Slurm's ``--json`` output, read into the few fields the bridge needs, for each data version Slurm has printed.

Slurm's JSON changes with its version: 22.05 prints OpenAPI ``v0.0.38``
(a node's ``state`` a lower-case word beside ``state_flags``, a job's
``job_state`` a word, numbers plain or null); 23.02 and later print the data
parser's ``v0.0.39`` to ``v0.0.42`` (a node's ``state`` a list of upper-case
words, base state first; a job's ``job_state`` a list; numbers as ``{set,
infinite, number}``). The version is read from the document's ``meta`` (its
plugin, else its Slurm release); a version not listed here is refused with a
``FormatError`` naming it, rather than read wrongly: a node misread as idle
could be given back while it runs a job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

#: The data versions read here, and the Slurm releases that print each.
VERSIONS = {"v0.0.38": "22.05", "v0.0.39": "23.02", "v0.0.40": "23.11", "v0.0.41": "24.05", "v0.0.42": "24.11"}
_RELEASES = {release: version for version, release in VERSIONS.items()}
_VERSION = re.compile(r"v0\.0\.\d+")
#: Base states of a node (the rest of its state words are flags).
BASE_STATES = frozenset({"IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN", "COMPLETING"})


class FormatError(Exception):
    """Slurm printed what cannot be read: one line naming the command, the version or the field."""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    #: The base state, upper-case: IDLE, ALLOCATED, MIXED, DOWN, ...
    state: str
    #: Every other state word: CLOUD, POWERED_DOWN, POWERING_UP, DRAIN, NOT_RESPONDING, ...
    flags: frozenset[str]
    address: str | None
    hostname: str | None
    reason: str
    cpus: int
    real_memory: int
    partitions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Job:
    job_id: int
    #: The base state, upper-case: PENDING, RUNNING, COMPLETED, ...
    state: str
    #: Why it waits (``state_reason``): Resources, Priority, Licenses, Dependency, ...
    reason: str
    partition: str
    node_count: int
    cpus_per_node: int
    #: MB per node, when the job asked so (per-CPU asks are multiplied out); None when it did not say.
    memory_per_node: int | None
    features: str
    licenses: str


def version(doc: Mapping[str, Any], command: str) -> str:
    """The data version of a document, or a FormatError naming what was found."""
    meta = doc.get("meta")
    if not isinstance(meta, Mapping):
        raise FormatError(f"{command}: no meta in the output: not Slurm's JSON")
    plugin = meta.get("plugin") if isinstance(meta.get("plugin"), Mapping) else {}
    for key in ("data_parser", "type"):
        found = _VERSION.search(str(plugin.get(key) or ""))
        if found:
            if found.group() not in VERSIONS:
                raise FormatError(f"{command}: Slurm's JSON of data version {found.group()} is not one this bridge "
                                  f"reads (it reads {', '.join(VERSIONS)})")
            return found.group()
    slurm = meta.get("Slurm") or meta.get("slurm") or {}
    release = ".".join(str(slurm.get("version", {}).get(k, "?")).zfill(2) for k in ("major", "minor")) \
        if isinstance(slurm, Mapping) and isinstance(slurm.get("version"), Mapping) else "?"
    if release in _RELEASES:
        return _RELEASES[release]
    raise FormatError(f"{command}: Slurm's JSON of an unknown data version (release {release}) is not one this "
                      f"bridge reads (it reads {', '.join(VERSIONS)})")


def parse(text: bytes | str, command: str) -> tuple[str, dict[str, Any]]:
    """The version and the document, or a FormatError."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"{command}: output is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise FormatError(f"{command}: output is not a JSON object")
    return version(doc, command), doc


def _number(value: Any, where: str) -> int | None:
    """A plain number (v0.0.38) or ``{set, infinite, number}`` (v0.0.39+); None when unset or infinite."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(f"{where}: {value!r} is not a number")
    return int(value)


def _words(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value.upper()] if value else []
    if isinstance(value, Sequence) and all(isinstance(w, str) for w in value):
        return [w.upper() for w in value]
    raise FormatError(f"{where}: {value!r} is neither a word nor a list of words")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ",".join(str(v) for v in value)
    return str(value)


def _field(item: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in item:
        raise FormatError(f"{where}: no field {key}")
    return item[key]


def nodes(text: bytes | str, command: str = "sinfo --json") -> list[Node]:
    """The nodes of ``sinfo --json`` (22.05) or ``scontrol show nodes --json`` (23.02 on)."""
    ver, doc = parse(text, command)
    out = []
    for i, n in enumerate(_field(doc, "nodes", command)):
        where = f"{command} ({ver}): nodes[{i}]"
        name = _field(n, "name", where)
        where = f"{command} ({ver}): node {name}"
        words = _words(_field(n, "state", where), f"{where}: state")
        if ver == "v0.0.38":
            words += _words(n.get("state_flags") or [], f"{where}: state_flags")
        base = next((w for w in words if w in BASE_STATES), "UNKNOWN")
        out.append(Node(name=name, state=base, flags=frozenset(w for w in words if w != base),
                        address=n.get("address") or None, hostname=n.get("hostname") or None,
                        reason=_text(n.get("reason")), cpus=_number(n.get("cpus"), f"{where}: cpus") or 0,
                        real_memory=_number(n.get("real_memory"), f"{where}: real_memory") or 0,
                        partitions=tuple(n.get("partitions") or ())))
    return out


def jobs(text: bytes | str, command: str = "squeue --json") -> list[Job]:
    ver, doc = parse(text, command)
    out = []
    for i, j in enumerate(_field(doc, "jobs", command)):
        where = f"{command} ({ver}): jobs[{i}]"
        job_id = _number(_field(j, "job_id", where), f"{where}: job_id") or 0
        where = f"{command} ({ver}): job {job_id}"
        states = _words(_field(j, "job_state", where), f"{where}: job_state")
        node_count = max(1, _number(j.get("node_count"), f"{where}: node_count") or 1)
        cpus = _number(j.get("cpus"), f"{where}: cpus") or 0
        per_node = _number(j.get("minimum_cpus_per_node"), f"{where}: minimum_cpus_per_node") or 0
        cpus_per_node = max(per_node, -(-cpus // node_count) if cpus else 0, 1)
        memory = _number(j.get("memory_per_node"), f"{where}: memory_per_node")
        per_cpu = _number(j.get("memory_per_cpu"), f"{where}: memory_per_cpu")
        if memory is None and per_cpu is not None:
            memory = per_cpu * cpus_per_node
        out.append(Job(job_id=job_id, state=states[0] if states else "UNKNOWN", reason=_text(j.get("state_reason")),
                       partition=_text(_field(j, "partition", where)), node_count=node_count,
                       cpus_per_node=cpus_per_node, memory_per_node=memory or None,
                       features=_text(j.get("features")), licenses=_text(j.get("licenses"))))
    return out
