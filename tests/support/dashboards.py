"""The shipped alert rules and Grafana dashboard, and the PromQL they hold, as Prometheus would receive it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana" / "provisioner-dashboard.json"
RULES = ROOT / "examples" / "prometheus" / "provisioner-alerts.yaml"

#: What Grafana puts in place of its variables before a query is sent: any value of the right kind will do.
GRAFANA_VARIABLES = {"__rate_interval": "5m", "__interval": "1m", "__range": "6h", "job": "provisioner"}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(doc: dict) -> Iterator[dict]:
    for panel in doc["panels"]:
        yield panel
        yield from panel.get("panels", [])


def grafana(expr: str) -> str:
    """``expr`` with Grafana's variables ($name, ${name}, [[name]]) replaced as Grafana would."""
    def value(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        assert name in GRAFANA_VARIABLES, f"unknown dashboard variable {name!r} in {expr!r}"
        return GRAFANA_VARIABLES[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\]", value, expr)


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every target and query variable of the dashboard."""
    doc = dashboard()
    out = []
    for panel in panels(doc):
        for target in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {target['refId']}", grafana(target["expr"])))
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", var["query"]["query"])
            assert m, f"variable {var['name']}: expected label_values(METRIC, LABEL)"
            out.append((f"variable {var['name']}", grafana(m.group(1))))
            out.append((f"variable {var['name']} (label)", f'count by ({m.group(2)}) ({grafana(m.group(1))})'))
    return out


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def rule_queries() -> list[tuple[str, str]]:
    return [(f"alert {r['alert']}", r["expr"]) for r in alert_rules()]
