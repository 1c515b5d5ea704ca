"""Hands `ringward.repair` alerts to Airflow notifiers (any `BaseNotifier`: the SMTP, Slack, webhook
providers' or a team's own), and builds a Deadline Alert for the nightly DAG.

Which notifiers: a list of notifier objects given to `RepairReportOperator(alert_notifiers=...)`, or, by
default, the list an import path names: `$RINGWARD_ALERT_NOTIFIERS` or Airflow's `[ringward] alert_notifiers`
(`package.module:NAME` or `package.module.NAME`, a notifier or a list of them), read when the report runs.
Each alert calls each notifier once, on its own copy (a notifier renders its templated fields in place),
with the task's context plus `ringward_alert` (the alert as a dict: kind, severity, cluster, run_id, tables,
problem, fix, subject, message) and `ringward_alert_message` (its text), so a provider's notifier takes them
through its templated fields, e.g.
`SmtpNotifier(to="oncall@example.com", subject="{{ ringward_alert.subject }}",
html_content="<pre>{{ ringward_alert_message | e }}</pre>")` or
`SlackWebhookNotifier(slack_webhook_conn_id="slack", text="{{ ringward_alert_message_slack }}")`
(`ringward_alert_message_slack`: the text with `&`, `<` and `>` escaped as Slack requires).
Airflow renders notifier templates without HTML escaping and the text carries cluster, keyspace and table
names: an HTML field must escape it (`| e`), as the example does.
A notifier that fails is logged and the others still get the alert; the report does not fail over it.
"""

from __future__ import annotations

import copy
import importlib
import logging
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseNotifier
from airflow.sdk.definitions.callback import AsyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference
from ringward.clusters import NightlyDeadline
from ringward.errors import ConfigurationError
from ringward.repair import RepairAlert, decide_alerts, outcome_points

from ringward_airflow.metrics import emit

__all__ = [
    "ALERT_NOTIFIERS_ENV",
    "DEADLINE_ALERT_NAME",
    "configured_notifiers",
    "declared_deadline_alert",
    "deliver",
    "night_failed",
    "nightly_deadline_alert",
]

ALERT_NOTIFIERS_ENV = "RINGWARD_ALERT_NOTIFIERS"
DEADLINE_ALERT_NAME = "ringward nightly repair overran"
log = logging.getLogger(__name__)


def _import(path: str) -> Any:
    module, _, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not module or not name:
        raise ConfigurationError(f"Alert notifiers {path!r} is not an import path.",
                                 "Set it to package.module:NAME, NAME a notifier or a list of notifiers.")  # fmt: skip
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        fix = "Put the module on the workers' path, or fix the name."
        raise ConfigurationError(f"Alert notifiers {path!r} cannot be imported: {error}.", fix) from error


def configured_notifiers(path: str | None = None) -> list[BaseNotifier]:
    """The notifiers `path` (else $RINGWARD_ALERT_NOTIFIERS, else `[ringward] alert_notifiers`) names; none
    when nothing is configured."""
    if path is None:
        path = os.environ.get(ALERT_NOTIFIERS_ENV)
    if path is None:
        from airflow.sdk.configuration import conf

        path = conf.get("ringward", "alert_notifiers", fallback=None)
    if not path:
        return []
    found = _import(path)
    notifiers = list(found) if isinstance(found, list | tuple) else [found]
    wrong = [type(n).__name__ for n in notifiers if not isinstance(n, BaseNotifier)]
    if wrong:
        fix = "Name a BaseNotifier or a list of them (e.g. SmtpNotifier, SlackWebhookNotifier)."
        raise ConfigurationError(f"Alert notifiers {path!r} holds {', '.join(wrong)}, not Airflow notifiers.", fix)
    return notifiers


def slack_escaped(text: str) -> str:
    """`text` as Slack's message formatting needs it: `&`, `<` and `>` escaped, so that a name such as `<!channel>`
    or `<https://x|y>` in the alert is shown, never read as a mention or a link (Slack's "Escaping text")."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def deliver(alerts: Sequence[RepairAlert], notifiers: Sequence[BaseNotifier], context: Mapping[str, Any]) -> int:
    """Call every notifier with every alert (a copy of the notifier per alert); returns the calls that
    succeeded. A failing notifier is logged, not raised: the others still get the alert."""
    delivered = 0
    for alert in alerts:
        for notifier in notifiers:
            extended = {**context, "ringward_alert": alert.as_dict(), "ringward_alert_message": alert.message,
                        "ringward_alert_message_slack": slack_escaped(alert.message)}  # fmt: skip
            try:
                copy.deepcopy(notifier)(extended)
            except Exception as error:  # one broken notifier must not silence the others
                name = type(notifier).__name__
                log.error("Notifier %s could not send ringward alert %s: %s", name, alert.kind, error)
                continue
            delivered += 1
    return delivered


def night_failed(context: Mapping[str, Any], cluster: str) -> None:
    """A task of the night failed for good (its failure callback): the night's outcome gauge says FAILED and
    the configured notifiers get a night_failed alert. Never raises: a callback that fails hides the failure."""
    try:
        emit(outcome_points(cluster, "FAILED"))
        deliver(decide_alerts(cluster, str(context.get("run_id")), "FAILED", []), configured_notifiers(), context)
    except Exception as error:  # a broken notifier configuration must not hide the task's own failure
        log.error("ringward night_failed alert not sent (%s): %s", type(error).__name__, error)


def nightly_deadline_alert(
    notifier: type[BaseNotifier] | str,
    kwargs: Mapping[str, Any],
    after: timedelta = timedelta(hours=8),
    cluster: str | None = None,
) -> DeadlineAlert:
    """An Airflow Deadline Alert (Airflow 3.1+, `DAG(deadline=...)`): the triggerer calls `notifier(**kwargs)`
    (it must implement `async_notify`, as the SMTP and Slack providers' notifiers do) when a nightly run is
    still not finished `after` its queuing. `notifier`: the class, or its dotted import path (Airflow imports it
    where it can; the triggerer must). `cluster`: a declared cluster's name, added to the alert's name."""
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=after,
        callback=AsyncCallback(notifier, kwargs=dict(kwargs)),
        name=DEADLINE_ALERT_NAME if cluster is None else f"{DEADLINE_ALERT_NAME} ({cluster})",
    )


def declared_deadline_alert(cluster: str, declared: NightlyDeadline) -> DeadlineAlert:
    """The Deadline Alert a cluster's `nightly_deadline` declares (ringward.clusters). A notifier path that imports
    but is no notifier Airflow can await is refused, naming the cluster, the field and the fix."""
    try:
        return nightly_deadline_alert(declared.notifier, declared.kwargs, declared.after, cluster=cluster)
    except (AttributeError, ImportError, ValueError) as error:
        raise ConfigurationError(
            f"Cluster {cluster!r}, `nightly_deadline.notifier` {declared.notifier!r} cannot be a Deadline Alert's "
            f"callback: {error}",
            "Name a notifier class that implements async_notify (e.g. "
            "airflow.providers.smtp.notifications.smtp.SmtpNotifier) by its dotted import path.",
        ) from error
