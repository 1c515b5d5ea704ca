"""ringward.repair._alerts (what a night pages about) and ringward_airflow.alerts (to Airflow notifiers)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from airflow.sdk import DAG, BaseNotifier, DeadlineAlert
from ringward.errors import ConfigurationError
from ringward.repair import RepairStatus, decide_alerts
from ringward_airflow.alerts import configured_notifiers, deliver, nightly_deadline_alert

ROOT = Path(__file__).resolve().parents[3]

NOW = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
DAY = 86400


def status(table: str, age_days: float | None, never: int = 0) -> RepairStatus:
    oldest = None if age_days is None else NOW - timedelta(days=age_days)
    return RepairStatus("shop", table, 10 * DAY, NOW, 1.0 if never == 0 else 0.5, oldest, never, 0)


def test_tables_past_and_near_their_deadline_get_one_alert_each_naming_them_and_the_fix() -> None:
    statuses = [status("orders", 10.5), status("never", None, never=2), status("carts", 9.2), status("ok", 3)]
    alerts = decide_alerts("prod", "run-1", "DONE", statuses)
    assert [(a.kind, a.severity, a.tables) for a in alerts] == [
        ("gc_grace_passed", "critical", ("shop.never", "shop.orders")),
        ("gc_grace_near", "warning", ("shop.carts",)),
    ]
    message = alerts[0].message
    assert message.startswith("Cluster prod, run run-1: 2 table(s) have token ranges not repaired")
    assert "Tables: shop.never, shop.orders" in message and "\nFix: Repair them now" in message


@pytest.mark.parametrize(("state", "kind", "severity"), [("PARTIAL", "night_partial", "warning"),
                                                         ("FAILED", "night_failed", "critical")])  # fmt: skip
def test_a_night_ending_partial_or_failed_is_an_alert_with_its_counts(state: str, kind: str, severity: str) -> None:
    alerts = decide_alerts("prod", "run-1", state, [status("ok", 1)], {"failed": 2, "postponed": 0})
    assert [(a.kind, a.severity) for a in alerts] == [(kind, severity)]
    assert f"ended {state} (2 failed)." in alerts[0].message and "Fix: Read the repair" in alerts[0].message


def test_a_done_night_with_every_table_in_time_raises_nothing() -> None:
    assert decide_alerts("prod", "run-1", "DONE", [status("a", 8.9), status("b", 0.1)]) == []


class Recorder(BaseNotifier):
    template_fields = ("text",)
    calls: ClassVar[list[str]] = []

    def __init__(self, text: str, fail: bool = False) -> None:
        super().__init__()
        self.text = text
        self.fail = fail

    def notify(self, context: Any) -> None:
        if self.fail:
            raise RuntimeError("webhook down")
        Recorder.calls.append(self.text)


def test_each_alert_reaches_each_notifier_rendered_and_a_broken_notifier_does_not_stop_the_others() -> None:
    Recorder.calls = []
    alerts = decide_alerts("prod", "run-1", "PARTIAL", [status("orders", 11)], {"postponed": 3})
    template = Recorder("{{ ringward_alert.kind }}: {{ ringward_alert_message }}")
    delivered = deliver(alerts, [Recorder("x", fail=True), template], {"run_id": "run-1"})
    assert delivered == 2
    assert [call.split(":")[0] for call in Recorder.calls] == ["gc_grace_passed", "night_partial"]
    assert "Tables: shop.orders" in Recorder.calls[0] and "ended PARTIAL (3 postponed)" in Recorder.calls[1]
    assert template.text.startswith("{{")  # the configured notifier itself stays a template for the next alert


NOTIFIERS = [Recorder("{{ ringward_alert_message }}")]
NOT_A_NOTIFIER = ["hello"]


def test_notifiers_are_configured_by_import_path_and_a_wrong_one_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    assert configured_notifiers(f"{__name__}:NOTIFIERS") == NOTIFIERS
    monkeypatch.setenv("RINGWARD_ALERT_NOTIFIERS", f"{__name__}.NOTIFIERS")
    assert configured_notifiers() == NOTIFIERS
    with pytest.raises(ConfigurationError, match="not Airflow notifiers") as refused:
        configured_notifiers(f"{__name__}:NOT_A_NOTIFIER")
    assert "BaseNotifier" in str(refused.value)
    with pytest.raises(ConfigurationError, match="cannot be imported"):
        configured_notifiers("no_such_module_here:NOTIFIERS")


def test_the_deadline_alert_helper_builds_an_airflow_deadline_alert_a_dag_takes() -> None:
    alert = nightly_deadline_alert(Recorder, {"text": "nightly repair overran"}, after=timedelta(hours=6))
    assert isinstance(alert, DeadlineAlert) and alert.interval == timedelta(hours=6)
    assert alert.callback.kwargs == {"text": "nightly repair overran"}
    dag = DAG("ringward_deadline_probe", schedule=None, deadline=alert)
    assert dag.deadline == [alert]


def test_a_task_of_the_night_failing_for_good_sets_the_outcome_failed_and_alerts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ringward_airflow import metrics
    from ringward_airflow.alerts import night_failed

    sent: dict[str, float] = {}
    monkeypatch.setattr(metrics.Stats, "gauge", lambda name, value, tags: sent.update({tags["state"]: value}))
    monkeypatch.setenv("RINGWARD_ALERT_NOTIFIERS", f"{__name__}:NOTIFIERS")
    Recorder.calls = []
    night_failed({"run_id": "scheduled__1"}, "prod")
    assert sent == {"DONE": 0.0, "PARTIAL": 0.0, "FAILED": 1.0, "DISABLED": 0.0}
    assert len(Recorder.calls) == 1 and Recorder.calls[0].startswith("Cluster prod, run scheduled__1: The nightly")
    monkeypatch.setenv("RINGWARD_ALERT_NOTIFIERS", "no_such_module_here:X")
    night_failed({"run_id": "scheduled__2"}, "prod")  # a broken configuration is logged, not raised
    assert len(Recorder.calls) == 1


HOSTILE = '<img src=x onerror="alert(1)">'


def _documented_html_content(text: str) -> str:
    """The `html_content="..."` of the SmtpNotifier example in `text` (the guide, the module's docstring)."""
    found = re.findall(r'html_content="([^"]*)"', text)
    assert len(found) == 1, f"expected one SmtpNotifier html_content example, found {found}"
    return found[0]


@pytest.mark.parametrize("where", ["docs/operators-guide.md", "alerts.py docstring"])
def test_the_documented_email_template_escapes_hostile_names(where: str) -> None:
    import ringward_airflow.alerts
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    text = (ROOT / where).read_text() if where.endswith(".md") else str(ringward_airflow.alerts.__doc__)
    template = _documented_html_content(text)
    sent: list[str] = []

    class RecordingSmtp(SmtpNotifier):  # the provider's notifier, rendered as Airflow renders it; no mail sent
        def notify(self, context: Any) -> None:
            sent.append(str(self.html_content))

    statuses = [RepairStatus(HOSTILE, "t<b>", 10 * DAY, NOW, 1.0, NOW - timedelta(days=11), 0, 0)]
    alerts = decide_alerts(f"prod{HOSTILE}", "run-1", "DONE", statuses)
    notifier = RecordingSmtp(to="oncall@example.com", subject="{{ ringward_alert.subject }}", html_content=template)
    assert deliver(alerts, [notifier], {"run_id": "run-1"}) == 1
    (html,) = sent
    assert html.startswith("<pre>") and html.endswith("</pre>")
    body = html.removeprefix("<pre>").removesuffix("</pre>")
    assert "<" not in body and ">" not in body  # no markup from the names (nor from anything else in the text)
    assert "prod&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in body
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;.t&lt;b&gt;" in body  # keyspace.table, escaped


def _documented_slack_text(text: str) -> str:
    """The `text="..."` of the SlackWebhookNotifier example in `text` (the guide, the module's docstring)."""
    found = re.findall(r'SlackWebhookNotifier\(slack_webhook_conn_id="slack",\s+text="([^"]*)"\)', text)
    assert len(found) == 1, f"expected one SlackWebhookNotifier text example, found {found}"
    return found[0]


@pytest.mark.parametrize("where", ["docs/operators-guide.md", "alerts.py docstring"])
def test_the_documented_slack_template_shows_hostile_names_as_text(where: str) -> None:
    """Slack reads `<!channel>` as a mention and `<url|text>` as a link: the documented template must give it the
    name escaped (`&`, `<`, `>`), never live."""
    import ringward_airflow.alerts

    text = (ROOT / where).read_text() if where.endswith(".md") else str(ringward_airflow.alerts.__doc__)
    sent: list[str] = []

    class RecordingSlack(BaseNotifier):  # a templated `text` as the Slack provider's notifier has; nothing sent
        template_fields = ("text",)

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

        def notify(self, context: Any) -> None:
            sent.append(str(self.text))

    statuses = [RepairStatus("<!channel>", "t&<https://x|y>", 10 * DAY, NOW, 1.0, NOW - timedelta(days=11), 0, 0)]
    alerts = decide_alerts("prod<!here>", "run-1", "DONE", statuses)
    assert deliver(alerts, [RecordingSlack(_documented_slack_text(text))], {"run_id": "run-1"}) == 1
    (message,) = sent
    assert "<" not in message and ">" not in message  # no mention, no link: every bracket escaped
    assert "&lt;!channel&gt;.t&amp;&lt;https://x|y&gt;" in message and "prod&lt;!here&gt;" in message
