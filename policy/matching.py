"""Which templates and pools can serve a demand item."""

from __future__ import annotations

from messages.demand import SELECT_RE, HostItem
from messages.description import AttrValue, Template


def _compare(have: AttrValue, expr: str) -> bool:
    op, operand = SELECT_RE.match(expr.strip()).groups()  # type: ignore[union-attr]
    operand = operand.strip()
    if op in (">=", "<=", ">", "<"):
        try:
            left, right = float(have), float(operand)
        except (TypeError, ValueError):
            return False
        return {">=": left >= right, "<=": left <= right, ">": left > right, "<": left < right}[op]
    if isinstance(have, bool):
        return have == (operand.lower() in ("1", "true", "yes"))
    if isinstance(have, (int, float)):
        try:
            return float(have) == float(operand)
        except ValueError:
            return False
    return str(have) == operand


def template_matches(item: HostItem, template: Template, zone: str | None = None) -> bool:
    if item.template:
        return template.id == item.template
    attributes = dict(template.attributes)
    if "zone" not in attributes and (template.zone or zone):
        attributes["zone"] = template.zone or zone or ""
    for key, expr in item.select.items():
        if key not in attributes or not _compare(attributes[key], expr):
            return False
    return True
