"""Why a provider cannot serve a demand item, in words an operator can act on.

A decision that only said ``mismatch`` left the operator to compare
selectors with templates by hand. These functions say what is missing:
``no template has attribute gpus``, ``ncpus 4 < 8``, ``no template named
big``, ``lends no vcs``. They read descriptions only (pure, no clock), so
the planner's decisions, ``provisioner plan`` and the check of a demand as
it is put all say the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from messages.demand import SELECT_RE, BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.description import AttrValue, ProviderDescription, Template
from messages.records import ProviderRecord
from policy.matching import EPS, Selector, amount, compile_test

Item = HostItem | UnitItem | BundleItem

#: The comparison that failed, said the other way round: ``ncpus >=8`` failing on 4 reads ``ncpus 4 < 8``.
_FAILED = {">=": "<", "<=": ">", ">": "<=", "<": ">=", "=": "!=", "": "!="}
#: Templates named in a message, at most.
NAMED = 5


def _kind(item: Item) -> str:
    return "units" if isinstance(item, UnitItem) else "hosts"


def _have(template: Template, key: str, zone: str | None) -> AttrValue | None:
    if key in template.attributes:
        return template.attributes[key]
    if key == "zone":
        return template.zone or zone
    return None


def _number(value: AttrValue) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _show(value: AttrValue | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _named(ids: list[str]) -> str:
    more = f" and {len(ids) - NAMED} more" if len(ids) > NAMED else ""
    return ", ".join(ids[:NAMED]) + more


def _selector_miss(key: str, expr: str, templates: list[Template], zone: str | None) -> str | None:
    """What no template offers of one selector, or None when some template passes it."""
    test = compile_test(expr)
    values = [v for t in templates if (v := _have(t, key, zone)) is not None]
    if not values:
        return f"no template has attribute {key}"
    if any(test(v) for v in values):
        return None
    op, operand = SELECT_RE.match(expr.strip()).groups()  # type: ignore[union-attr]
    op, operand = op or "", operand.strip()
    numbers = [n for v in values if (n := _number(v)) is not None]
    if op in (">=", ">") and numbers:
        return f"{key} {_show(max(numbers))} {_FAILED[op]} {operand}"
    if op in ("<=", "<") and numbers:
        return f"{key} {_show(min(numbers))} {_FAILED[op]} {operand}"
    shown = sorted({_show(v) for v in values})
    return f"{key} {'/'.join(shown[:NAMED])} {_FAILED[op]} {operand}"


def why_not(item: Item, desc: ProviderDescription) -> str:
    """Why none of a provider's templates (or pools) can serve ``item``; "" when one can."""
    if desc.kind != _kind(item):
        return "lends units, not hosts" if desc.kind == "units" else "offers hosts, not units"
    if isinstance(item, UnitItem):
        if desc.pool(item.resource) is not None:
            return ""
        lent = sorted(p.resource for p in desc.pools)
        return f"lends no {item.resource}" + (f" (it lends {_named(lent)})" if lent else " (it lends nothing)")
    templates = desc.templates
    if not templates:
        return "offers no templates"
    if isinstance(item, HostItem) and item.template:
        if desc.template(item.template) is not None:
            return ""
        return f"no template named {item.template} (it has {_named([t.id for t in templates])})"
    misses = [m for key, expr in sorted(item.select.items())
              if (m := _selector_miss(key, expr, templates, desc.zone)) is not None]
    if misses:
        return "; ".join(misses)
    selector = Selector(item)
    selected = [t for t in templates if selector.matches(t, desc.zone)]
    if not selected:
        wanted = ", ".join(f"{k}{v if v[:1] in '<>=' else '=' + v}" for k, v in sorted(item.select.items()))
        return f"no single template has {wanted}"
    if isinstance(item, BundleItem):
        fits = [t for t in selected if all(amount(t.attributes.get(k)) >= need * (1 - EPS)
                                           for k, need in item.resources.items())]
        if not fits:
            return "too small: " + _too_small(item, selected)
    return ""


def _too_small(item: BundleItem, templates: list[Template]) -> str:
    """What one bundle needs that no selected template has, e.g. ``ngpus 0 < 1``."""
    short = []
    for key, need in sorted(item.resources.items()):
        best = max(amount(t.attributes.get(key)) for t in templates)
        if best < need * (1 - EPS):
            short.append(f"{key} {_show(best)} < {_show(float(need))}")
    return "no template holds one bundle (" + ", ".join(short) + ")"


def unservable(demand: DemandSnapshot, providers: Mapping[str, ProviderRecord]) -> list[str]:
    """One warning per item that no described provider can serve, whatever its room or status.

    A provider that has not described itself yet (a daemon starting, or one whose
    ``describe`` keeps failing) may serve the item, and it alone must not silence
    what the others' descriptions tell: the warning says what the described
    providers cannot serve and names the ones not described yet. With none
    described there is nothing to judge by, and one line says so.
    """
    pending = sorted(n for n, r in providers.items() if r.description is None)
    described = {n: r.description for n, r in sorted(providers.items()) if r.description is not None}
    if not described:
        return [f"demand not checked: no provider has described itself yet ({_named(pending)})"] if pending else []
    out: list[str] = []
    cache: dict[tuple, str | None] = {}
    for item in demand.items:
        key = _wish(item)
        if key not in cache:
            cache[key] = _no_one(item, described, pending)
        said = cache[key]
        if said is not None:
            out.append(f"item {item.id}: {said}")
    return out


def _wish(item: Item) -> tuple:
    if isinstance(item, UnitItem):
        return ("units", item.resource)
    if isinstance(item, BundleItem):
        return ("bundles", tuple(sorted(item.select.items())), tuple(sorted(item.resources.items())))
    return ("hosts", item.template, tuple(sorted(item.select.items())))


def _no_one(item: Item, described: Mapping[str, ProviderDescription], pending: list[str]) -> str | None:
    """Why no described provider serves ``item``, or None when one does; ``pending``: the providers not
    described yet, named after it (they may serve it once they have)."""
    kind = _kind(item)
    same = {n: d for n, d in described.items() if d.kind == kind}
    whys = {n: why_not(item, d) for n, d in same.items()}
    if any(w == "" for w in whys.values()):
        return None
    who = "described provider" if pending else "provider"
    later = f"; not described yet: {_named(pending)}" if pending else ""
    if not same:
        return f"no {'described' if pending else 'configured'} provider offers {kind}{later}"
    said = "; ".join(f"{n}: {w}" for n, w in list(whys.items())[:NAMED])
    more = f"; {len(whys) - NAMED} more" if len(whys) > NAMED else ""
    return f"no {who} can serve it ({said}{more}){later}"
