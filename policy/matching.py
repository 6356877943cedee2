"""Which templates can serve a host (or bundle) demand item.

A selector is compiled once per item shape, then tested against many
templates: planning over thousands of templates must stay cheap.
"""

from __future__ import annotations

import operator
from functools import lru_cache
from typing import Callable

from messages.demand import SELECT_RE, BundleItem, HostItem
from messages.description import AttrValue, Template

_NUMERIC: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}

Test = Callable[[AttrValue], bool]


def _test(expr: str) -> Test:
    op, operand = SELECT_RE.match(expr.strip()).groups()  # type: ignore[union-attr]
    operand = operand.strip()
    if op in _NUMERIC:
        compare, right = _NUMERIC[op], float(operand)

        def numeric(have: AttrValue) -> bool:
            try:
                return compare(float(have), right)
            except (TypeError, ValueError):
                return False

        return numeric
    truthy = operand.lower() in ("1", "true", "yes")
    try:
        number: float | None = float(operand)
    except ValueError:
        number = None

    def equal(have: AttrValue) -> bool:
        if isinstance(have, bool):
            return have == truthy
        if isinstance(have, (int, float)):
            return number is not None and float(have) == number
        return str(have) == operand

    return equal


class Selector:
    """A host or bundle item's wish, ready to test templates (a bundle item selects, never names one)."""

    def __init__(self, item: HostItem | BundleItem) -> None:
        self.template = item.template if isinstance(item, HostItem) else None
        self.tests = _compiled(tuple(sorted(item.select.items())))

    def matches(self, template: Template, zone: str | None = None) -> bool:
        if self.template:
            return template.id == self.template
        attributes = template.attributes
        for key, test in self.tests:
            if key in attributes:
                have = attributes[key]
            elif key == "zone" and (template.zone or zone):
                have = template.zone or zone or ""
            else:
                return False
            if not test(have):
                return False
        return True


@lru_cache(maxsize=4096)
def _compiled(select: tuple[tuple[str, str], ...]) -> tuple[tuple[str, Test], ...]:
    """The tests of one item shape: every round builds selectors again for the same few shapes."""
    return tuple((key, _test(expr)) for key, expr in select)


def template_matches(item: HostItem, template: Template, zone: str | None = None) -> bool:
    return Selector(item).matches(template, zone)
