"""A notifier for tests/dags/test_metrics_and_alerts.py: records each call (its rendered subject and message,
and the alert it was given) as a JSON line in the file $RINGWARD_TEST_ALERTS names. The night's child process
finds it through $RINGWARD_ALERT_NOTIFIERS=alert_recorder:NOTIFIERS, as a deployment names its own."""

from __future__ import annotations

import json
import os
from typing import Any

from airflow.sdk import BaseNotifier


class RecordingNotifier(BaseNotifier):
    template_fields = ("subject", "message")

    def __init__(self, subject: str, message: str) -> None:
        super().__init__()
        self.subject = subject
        self.message = message

    def notify(self, context: Any) -> None:
        with open(os.environ["RINGWARD_TEST_ALERTS"], "a", encoding="utf-8") as out:
            record = {"subject": self.subject, "message": self.message, "alert": context["ringward_alert"]}
            out.write(json.dumps(record) + "\n")


NOTIFIERS = [RecordingNotifier(subject="{{ ringward_alert.subject }}", message="{{ ringward_alert_message }}")]
