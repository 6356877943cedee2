"""The shipped alerting rules pass ``promtool check rules`` and their unit tests (``promtool test rules``).

promtool comes with Debian's ``prometheus`` package, which ``.ci/run`` installs; without it these tests fail
rather than skip, so a machine that cannot check the rules says so.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.support.dashboards import RULES, alert_rules

RULES_DIR = RULES.parent
RULE_TESTS = RULES_DIR / "provisioner-alerts.test.yaml"

#: The alerts the rules must carry, one per condition operators asked to be told of.
ALERTS = {"ProvisionerProviderDisabled", "ProvisionerProviderDegraded", "ProvisionerLeaseFlapping",
          "ProvisionerOrphans", "ProvisionerBudgetClamping", "ProvisionerRequestsFailing",
          "ProvisionerCostRateHigh", "ProvisionerControllerUnreachable", "ProvisionerAnswersUnrecorded"}


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: it comes with Debian's prometheus package, which .ci/run installs "
                    "(apt-get install prometheus)")
    return found


def run(promtool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, cwd=RULES_DIR)


def test_promtool_checks_the_rules(promtool):
    r = run(promtool, "check", "rules", RULES.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in r.stdout


def test_promtool_unit_tests_of_the_rules_pass(promtool):
    r = run(promtool, "test", "rules", RULE_TESTS.name)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_alert_waits_has_a_severity_and_says_what_to_do():
    found = alert_rules()
    assert {r["alert"] for r in found} == ALERTS
    for rule in found:
        name = rule["alert"]
        assert rule.get("for"), f"{name}: no for:, a blip would page"
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"].strip(), name
        assert len(rule["annotations"]["description"].split()) >= 20, f"{name}: the description says what to do"


def test_every_alert_is_tested_firing_and_not_firing():
    doc = yaml.safe_load(RULE_TESTS.read_text())
    assert doc["rule_files"] == [RULES.name]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in doc["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert firing == ALERTS, f"never seen firing: {sorted(ALERTS - firing)}"
    assert quiet == ALERTS, f"never seen quiet: {sorted(ALERTS - quiet)}"
