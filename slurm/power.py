"""Power saving: what Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram ask, as facts.

Slurm calls them with a hostlist of nodes declared ``State=CLOUD`` and
waits for none of them to finish its work: a program that blocks holds up
slurmctld's script runner. So each one records what Slurm asked, durably,
in the controller (``nodes_resumed`` / ``nodes_suspended`` /
``nodes_resume_failed``, unfenced inputs like an operator's) and returns:
the planner orders one host per resumed name within the usual caps, and
the owners make, bind and give back the hosts (``policy.nodes``).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from config.hostlists import compress_hostlist, expand_hostlist
from config.models import SlurmConfig
from messages.facts import Fact, NodesChanged, make_fact

#: Seconds Slurm waits for a resumed node when slurm.conf does not say (its own default).
RESUME_TIMEOUT = 60.0
#: Where Slurm's config is when ``SLURM_CONF`` does not say.
SLURM_CONF = "/etc/slurm/slurm.conf"

Kind = str  # "nodes_resumed" | "nodes_suspended" | "nodes_resume_failed"
ASKED = {"resume": "nodes_resumed", "suspend": "nodes_suspended", "resume-fail": "nodes_resume_failed"}


@dataclass(frozen=True)
class Asked:
    """What one call of a power-saving program comes to: the facts to write, and the names no node set maps."""

    facts: list[Fact]
    unmapped: list[str]


def node_sets(cfg: SlurmConfig) -> dict[str, tuple[str, str]]:
    """Each node name the config declares -> (provider, template)."""
    out: dict[str, tuple[str, str]] = {}
    for ns in cfg.nodes:
        for name in expand_hostlist(ns.names):
            out[name] = (ns.provider, ns.template)
    return out


def asked(program: str, hostlist: str, cfg: SlurmConfig, resume_timeout: float | None, now: float) -> Asked:
    """The facts of ``program`` (``resume``, ``suspend``, ``resume-fail``) for the nodes of ``hostlist``.

    Names are grouped by provider and template, one fact each. ``resume_timeout``: how long Slurm waits for a
    resumed node (the host is given up as an orphan then); a raised ``HostlistError`` names a bad expression.
    """
    kind = ASKED[program]
    sets = node_sets(cfg)
    groups: dict[tuple[str, str], list[str]] = {}
    unmapped: list[str] = []
    for name in expand_hostlist(hostlist):
        where = sets.get(name)
        if where is None:
            unmapped.append(name)
        else:
            groups.setdefault(where, []).append(name)
    why = {"resume": "ResumeProgram", "suspend": "SuspendProgram", "resume-fail": "ResumeFailProgram"}[program]
    facts = [make_fact(NodesChanged(kind=kind, names=names, template=template if kind == "nodes_resumed" else None,
                                    join_timeout=resume_timeout if kind == "nodes_resumed" else None,
                                    reason=f"Slurm's {why} {compress_hostlist(names)}"),
                       provider=provider, now=now)
             for (provider, template), names in sorted(groups.items())]
    return Asked(facts, unmapped)


def resume_timeout(env: dict[str, str] | None = None) -> float:
    """``ResumeTimeout`` from slurm.conf (and the files it includes), read from the file, not asked of
    slurmctld: a ResumeProgram must not wait on the controller that runs it."""
    env = os.environ if env is None else env
    found = _setting(Path(env.get("SLURM_CONF") or SLURM_CONF), "resumetimeout", depth=0)
    if found is None:
        return RESUME_TIMEOUT
    try:
        return float(found)
    except ValueError:
        return RESUME_TIMEOUT


_LINE = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(\S+)")


def _setting(path: Path, key: str, depth: int) -> str | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    value = None
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        stripped = line.strip()
        if stripped.lower().startswith("include ") and depth < 3:
            for inc in _included(path, stripped.split(None, 1)[1]):
                value = _setting(inc, key, depth + 1) or value
            continue
        m = _LINE.match(line)
        if m and m.group(1).lower() == key:
            value = m.group(2)
    return value


def _included(base: Path, pattern: str) -> Iterable[Path]:
    pattern = pattern.strip()
    full = pattern if os.path.isabs(pattern) else str(base.parent / pattern)
    return [Path(p) for p in sorted(glob.glob(full))]
