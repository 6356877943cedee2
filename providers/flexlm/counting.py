"""What lmstat's answer means for one pool: this cluster's use, use outside every borrowing cluster, and the errors.

Pure functions of a parsed lmstat answer. The exit code of a failure follows
from what an operator can do about it: a server that does not answer, or
cannot say how a feature is used right now, may answer at the next try (75);
a feature it does not serve, or serves uncounted, will not change by waiting
(78).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from providers.flexlm import lmstat
from providers.flexlm.errors import ConfigError, Transient
from providers.flexlm.settings import Feature


def host_matches(host: str, globs: Sequence[str]) -> bool:
    """Hosts are compared without case, by full name or by the name before the first dot.

    lmstat prints whatever the client reported (``cn001`` or ``cn001.hpc.example``),
    so a glob such as ``cn00[1-8]`` must work for both.
    """
    full = host.lower()
    short = full.split(".", 1)[0]
    return any(fnmatchcase(full, g) or fnmatchcase(short, g) for g in globs)


def feature_usage(status: lmstat.Lmstat, feature: Feature, spec: str = "") -> lmstat.Feature:
    """The one lmstat feature a settings entry names, or the reason it cannot be used now.

    ``spec`` is the server as the settings name it: lmstat leaves it out when it reaches none.
    """
    spec = spec or status.spec or "system"
    if not status.reachable:
        why = status.error or "; ".join(f"{s.host}: {s.message}" for s in status.servers if not s.up)
        raise Transient(f"license server {spec} cannot be reached: {why or 'no server is up'}")
    found = status.find(feature.feature, feature.vendor)
    vendors = [feature.vendor] if feature.vendor else sorted({f.vendor for f in found if f.vendor})
    down = [v for v in (status.vendor(name) for name in vendors) if v is not None and not v.up]
    if not found and not feature.vendor:
        down = [v for v in status.vendors if not v.up]
    if down:
        raise Transient(f"vendor daemon {down[0].name} is down: {down[0].message}")
    if not found:
        served_by = f" (vendor daemon {feature.vendor})" if feature.vendor else ""
        raise ConfigError(f"feature {feature.feature}{served_by} is not served by license server {spec}")
    if len(found) > 1:
        names = ", ".join(sorted(f.vendor or "?" for f in found))
        raise ConfigError(f"feature {feature.feature} is served by vendor daemons {names}: "
                          f"say which one with the feature's vendor key")
    usage = found[0]
    if usage.state == "uncounted":
        raise ConfigError(f"feature {feature.feature} is uncounted at the license server: there is no count to lend")
    if usage.state == "error":
        raise Transient(f"license server cannot say how feature {feature.feature} is used: {usage.message}")
    return usage


def held_by(usage: lmstat.Feature, globs: Sequence[str]) -> int:
    """Tokens checked out from hosts that match the globs; queued requests hold none."""
    return sum(c.count for c in usage.checkouts if host_matches(c.host, globs))


def held_outside(usage: lmstat.Feature, clusters: Iterable[Sequence[str]]) -> int:
    """Tokens in use by anything but the borrowing clusters' hosts: desktops, borrowed laptops, reservations.

    Counted as lmstat's total in use minus what the clusters' hosts hold, not
    as the sum of the other lines: tokens lmstat counts but does not list (a
    reservation, a line it left out) are then outside too, which can only make
    the pool lend less.
    """
    globs = [tuple(g) for g in clusters]
    inside = sum(c.count for c in usage.checkouts if any(host_matches(c.host, g) for g in globs))
    return max(usage.in_use - inside, 0)
