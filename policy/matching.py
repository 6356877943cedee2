"""Which templates can serve a host (or bundle) demand item.

A selector is compiled once per item shape, then tested against many
templates: planning over thousands of templates must stay cheap.
``Serves`` adds what a bundle needs: a host of the template must hold one
of its bundles (what reclaim asks of an idle host before keeping it).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from functools import lru_cache
from typing import Callable

from messages.demand import SELECT_RE, BundleItem, HostItem
from messages.description import AttrValue, ProviderDescription, Template

_NUMERIC: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}

Test = Callable[[AttrValue], bool]


def compile_test(expr: str) -> Test:
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


#: Relative slack when comparing amounts, as the packer allows (10 bundles of 0.1 CPU fit on 1 CPU).
EPS = 1e-9


def amount(value: AttrValue | None) -> float:
    """A template attribute as an amount a bundle can take some of (0 when it is not a number)."""
    if isinstance(value, bool) or value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except ValueError:
        return 0.0


class Serves(Selector):
    """Whether a host of a template can do an item's work: its selector matches and, for a bundle
    item, the host holds at least one of its bundles (every resource it needs, in full)."""

    def __init__(self, item: HostItem | BundleItem) -> None:
        super().__init__(item)
        self.needs = tuple(item.resources.items()) if isinstance(item, BundleItem) else ()

    def matches(self, template: Template, zone: str | None = None) -> bool:
        if not super().matches(template, zone):
            return False
        attributes = template.attributes
        return all(amount(attributes.get(key)) >= need * (1 - EPS) for key, need in self.needs)


class Serving:
    """``Serves`` asked by provider and template id, each answer kept: whether a host of that template can do
    the item's work. What it reads is the item's shape and the descriptions (``descriptions``, by provider),
    so one kept with a catalog (``policy.catalog``) holds while the descriptions do."""

    def __init__(self, item: HostItem | BundleItem, descriptions: Mapping[str, ProviderDescription | None]) -> None:
        self.serves = Serves(item)
        self.descriptions = descriptions
        self._said: dict[tuple[str, str | None], bool] = {}

    def __call__(self, provider: str, template: str | None) -> bool:
        key = (provider, template)
        said = self._said.get(key)
        if said is None:
            said = self._said[key] = self.match(provider, template)
        return said

    def match(self, provider: str, template: str | None) -> bool:
        """The same answer, worked out anew."""
        desc = self.descriptions.get(provider)
        t = desc.template(template) if desc is not None and template else None
        return t is not None and self.serves.matches(t, desc.zone)  # type: ignore[union-attr]


def shape(item: HostItem | BundleItem) -> tuple:
    """What ``Serves`` reads of an item: its template, selectors and, for a bundle item, the resources."""
    return (item.template if isinstance(item, HostItem) else None, tuple(sorted(item.select.items())),
            tuple(sorted(item.resources.items())) if isinstance(item, BundleItem) else ())


@lru_cache(maxsize=4096)
def _compiled(select: tuple[tuple[str, str], ...]) -> tuple[tuple[str, Test], ...]:
    """The tests of one item shape: every round builds selectors again for the same few shapes."""
    return tuple((key, compile_test(expr)) for key, expr in select)


def template_matches(item: HostItem, template: Template, zone: str | None = None) -> bool:
    return Selector(item).matches(template, zone)
