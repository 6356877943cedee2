"""The Grafana dashboard and the alert rules query only what the daemon exports.

Every PromQL expression (dashboard targets and variables, alert rules) is
parsed with a PromQL parser; each metric it selects must be a sample name of
the daemon's real exposition (``tests/support/exported.py`` scrapes it), and
each label it matches on or groups by must be one those samples carry, or
one Prometheus adds when it scrapes (``job``, ``instance``). And every
metric the daemon exports is in the metrics table of ``docs/operations.md``.
"""

from __future__ import annotations

import re

import promql_parser
import pytest

from tests.support.dashboards import ROOT, dashboard, dashboard_queries, panels, rule_queries
from tests.support.exported import TARGET_LABELS, exported

OPERATIONS = ROOT / "docs" / "operations.md"

#: Metrics the dashboard must show, one per panel operators asked for.
SHOWN = {"provisioner_instances", "provisioner_units", "provisioner_cost_per_hour", "provisioner_cost_total",
         "provisioner_requests_total", "provisioner_script_duration_seconds_bucket",
         "provisioner_script_failures_total", "provisioner_demand_unmet", "provisioner_budget_remaining",
         "provisioner_lease_owned", "provisioner_journal_commit_seconds_bucket",
         "provisioner_instances_by_capacity_type", "provisioner_cost_per_hour_by_capacity_type",
         "provisioner_cost_by_capacity_type_total"}


@pytest.fixture(scope="module")
def names(tmp_path_factory) -> dict[str, set[str]]:
    return exported(tmp_path_factory.mktemp("exported"))


class Used:
    """What one expression selects: (metric, label names matched) and the label names it groups by."""

    def __init__(self, expr: str) -> None:
        self.selectors: list[tuple[str, set[str]]] = []
        self.grouped: list[tuple[set[str], set[str]]] = []  # (labels grouped by, metrics beneath)
        self._walk(promql_parser.parse(expr))

    def _walk(self, node) -> set[str]:
        """The metrics selected at or beneath ``node``."""
        if isinstance(node, promql_parser.VectorSelector):
            matchers = node.matchers.matchers + [m for group in node.matchers.or_matchers for m in group]
            name = node.name or next((m.value for m in matchers if m.name == "__name__"), None)
            assert name, f"a selector with no metric name: {node}"
            self.selectors.append((name, {m.name for m in matchers if m.name != "__name__"}))
            return {name}
        if isinstance(node, promql_parser.MatrixSelector):
            return self._walk(node.vector_selector)
        if isinstance(node, (promql_parser.NumberLiteral, promql_parser.StringLiteral)):
            return set()
        if isinstance(node, promql_parser.Call):
            return set().union(*(self._walk(a) for a in node.args))
        if isinstance(node, promql_parser.AggregateExpr):
            beneath = self._walk(node.expr) | (self._walk(node.param) if node.param is not None else set())
            if node.modifier is not None:
                self.grouped.append((set(node.modifier.labels), beneath))
            return beneath
        if isinstance(node, promql_parser.BinaryExpr):
            beneath = self._walk(node.lhs) | self._walk(node.rhs)
            matching = node.modifier.matching if node.modifier is not None else None
            if matching is not None:
                self.grouped.append((set(matching.labels), beneath))
            return beneath
        if isinstance(node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)):
            return self._walk(node.expr)
        raise AssertionError(f"a PromQL node this test does not know: {type(node).__name__}")


def check(where: str, expr: str, names: dict[str, set[str]]) -> list[str]:
    """What is wrong with ``expr``: metrics not exported, labels they do not carry."""
    try:
        used = Used(expr)
    except ValueError as exc:
        return [f"{where}: not PromQL: {exc}"]
    wrong = []
    for metric, labels in used.selectors:
        if metric not in names:
            wrong.append(f"{where}: {metric} is not exported")
        elif labels - names[metric] - TARGET_LABELS:
            wrong.append(f"{where}: {metric} has no label {sorted(labels - names[metric] - TARGET_LABELS)}")
    for labels, beneath in used.grouped:
        known = set(TARGET_LABELS).union(*(names.get(m, set()) for m in beneath))
        if labels - known:
            wrong.append(f"{where}: groups by {sorted(labels - known)}, which none of {sorted(beneath)} carries")
    return wrong


def test_every_dashboard_query_uses_only_exported_metrics_and_their_labels(names):
    queries = dashboard_queries()
    assert len(queries) >= 15
    assert [w for where, expr in queries for w in check(where, expr, names)] == []


def test_every_alert_rule_uses_only_exported_metrics_and_their_labels(names):
    queries = rule_queries()
    assert len(queries) == 9
    assert [w for where, expr in queries for w in check(where, expr, names)] == []


def test_the_check_finds_a_metric_or_label_the_daemon_does_not_export(names):
    """The check itself: a made-up metric, a label a metric lacks, a grouping by it, a name suffix."""
    assert check("x", "sum(provisioner_cost_per_hour)", names) == []
    assert check("x", "provisioner_hosts", names) == ["x: provisioner_hosts is not exported"]
    assert check("x", 'provisioner_requests_total{reason="capacity"}', names) == [
        "x: provisioner_requests_total has no label ['reason']"]
    assert check("x", "sum by (le) (rate(provisioner_script_failures_total[5m]))", names) == [
        "x: groups by ['le'], which none of ['provisioner_script_failures_total'] carries"]
    assert check("x", "rate(provisioner_requests[5m])", names) == ["x: provisioner_requests is not exported"]
    assert check("x", "provisioner_journal_commit_seconds_bucket", names) == []
    assert check("x", "provisioner_journal_commit_seconds", names) == [
        "x: provisioner_journal_commit_seconds is not exported"]
    assert check("x", "sum(", names)[0].startswith("x: not PromQL")


def test_the_dashboard_shows_what_operators_asked_for():
    shown = {metric for _, expr in dashboard_queries() for metric, _ in Used(expr).selectors}
    assert SHOWN <= shown, f"no panel for {sorted(SHOWN - shown)}"


def test_the_dashboard_imports_anywhere_its_data_source_is_a_variable():
    doc = dashboard()
    (source,) = [v for v in doc["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    ref = {"type": "prometheus", "uid": f"${{{source['name']}}}"}
    ids = [p["id"] for p in panels(doc)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in panels(doc):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == ref, panel["title"]
        assert panel["targets"] and all(t["datasource"] == ref for t in panel["targets"]), panel["title"]
        assert panel.get("description"), f"{panel['title']}: says what it shows"
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            assert var["datasource"] == ref, var["name"]
    assert doc["uid"] and doc["title"] and "id" not in doc, "no instance-specific id: Grafana assigns one"


def test_every_exported_metric_is_in_the_metrics_table_of_the_operations_docs(names):
    documented = set(re.findall(r"^\| `(provisioner_\w+)` \|", OPERATIONS.read_text(), re.MULTILINE))
    for sample in names:
        if sample.endswith("_created"):
            continue
        family = re.sub(r"_(bucket|count|sum)$", "", sample)
        assert sample in documented or family in documented, f"{sample} is not in docs/operations.md's table"
