"""deploy/grafana/ringward-dashboard.json and deploy/prometheus/ringward-alerts.yaml parse, and every series
they use is one ringward sends (METRIC_SPECS, as statsd_exporter names it with statsd_prefix `airflow`), with
labels among its tags; the operator's guide lists every name."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from ringward.repair import METRIC_SPECS

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "ringward-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "ringward-alerts.yaml"
GUIDE = ROOT / "docs" / "operators-guide.md"
SERIES = {"airflow_" + name.replace(".", "_"): spec for name, spec in METRIC_SPECS.items()}
NAME = re.compile(r"\bairflow_ringward_[a-z_]+")
LABEL = re.compile(r"([a-z_]+)\s*(?:=~|!~|!=|=)\s*\"")
BY = re.compile(r"\bby\s*\(([^)]*)\)")


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["query"]["query"]


def rule_queries(rules: dict[str, Any]) -> Iterator[str]:
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


def check(expr: str) -> set[str]:
    """The series `expr` uses; fails on one ringward does not send or a label none of them carries."""
    names = set(NAME.findall(expr))
    assert names, f"no ringward series in {expr!r}"
    unknown = names - SERIES.keys()
    assert not unknown, f"{expr!r} uses {unknown}, which ringward does not send"
    tags = {tag for name in names for tag in SERIES[name].tags}
    labels = set(LABEL.findall(expr)) | {label.strip() for group in BY.findall(expr) for label in group.split(",")}
    assert labels <= tags, f"{expr!r} uses labels {labels - tags} that {names} do not carry"
    return names


def test_the_dashboard_is_grafana_json_over_series_ringward_sends() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["panels"]
    queries = list(dashboard_queries(dashboard))
    used = set().union(*(check(expr) for expr in queries))
    assert len(queries) > 20
    # The headline figures are on it.
    headline = {
        "airflow_ringward_repair_table_coverage_ratio",
        "airflow_ringward_repair_run_outcome",
        "airflow_ringward_repair_live_back_pressure_holds",
        "airflow_ringward_migration_ranges_moved",
    }
    assert headline <= used


def test_the_alert_rules_are_prometheus_yaml_over_series_ringward_sends() -> None:
    rules = yaml.safe_load(RULES.read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    assert {"RingwardTablePastGcGrace", "RingwardTableNearGcGrace", "RingwardNightPartialOrFailed",
            "RingwardMigrationWaitingForApproval"} <= alerts.keys()  # fmt: skip
    for expr in rule_queries(rules):
        check(expr)
    assert ">= 0.9" in alerts["RingwardTableNearGcGrace"]["expr"]
    assert 'state=~"PARTIAL|FAILED"' in alerts["RingwardNightPartialOrFailed"]["expr"]
    assert all(rule["labels"]["severity"] in {"warning", "critical"} for rule in alerts.values())
    assert all("Fix:" in rule["annotations"]["description"] for rule in alerts.values())


def test_the_guide_lists_every_metric_name_and_its_tags() -> None:
    guide = GUIDE.read_text()
    section = guide[guide.index("## 7. Metrics and alerts") :]
    missing = [
        spec.name for spec in METRIC_SPECS.values() if f"| `{spec.name}` | {', '.join(spec.tags)} |" not in section
    ]
    assert missing == []


def test_a_series_ringward_does_not_send_is_caught() -> None:
    try:
        check('airflow_ringward_repair_table_coverage{cluster="x"}')
    except AssertionError as error:
        assert "does not send" in str(error)
    else:
        raise AssertionError("an unknown series passed")
    try:
        check("max by (stage) (airflow_ringward_repair_table_overdue)")
    except AssertionError as error:
        assert "labels {'stage'}" in str(error)
    else:
        raise AssertionError("a label the series lacks passed")
