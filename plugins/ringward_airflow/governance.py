"""The migration's approval as a control: the deployment's `[ringward]` settings, read when a task runs.

Run settings that give up a safety step are refused by the precheck unless the deployment allows them
(`ringward.governance`); the stages that act on them (`approval_needed`, `pre_repair_wanted`, the cleanup's
snapshot) take the safe value when it does not. `MigrationApprovalOperator` is Airflow's ApprovalOperator
that shows the run's settings to the approver, offers the approval only to the deployment's `approvers`
(Airflow's assigned users), and does not accept an approval from the person who triggered the run.

The settings come from Airflow's configuration (airflow.cfg or `AIRFLOW__RINGWARD__*` in the environment of
the workers), which only the people running Airflow change: not a run param, not an Airflow Variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Context
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk.execution_time.hitl import HITLUser
from ringward.clusters import metrics_cluster
from ringward.errors import MigrationError
from ringward.governance import (
    APPROVERS,
    SECTION,
    SELF_APPROVAL,
    approver_refusal,
    config_name,
    effective_setting,
    refuse_unpermitted_settings,
    run_settings_markdown,
)

from ringward_airflow.hooks import RingwardCassandraHook
from ringward_airflow.metrics import emit_approval

__all__ = [
    "MigrationApprovalOperator",
    "approval_needed",
    "deployment_allows",
    "pre_repair_wanted",
    "refuse_unpermitted",
    "snapshot_wanted",
]


def deployment_allows(key: str) -> bool:
    """Whether `[ringward] key` is on in Airflow's configuration (off when not set)."""
    return bool(conf.getboolean(SECTION, key, fallback=False))


def refuse_unpermitted(settings: Mapping[str, Any]) -> None:
    """ConfigurationError for a run setting that gives up a safety step the deployment does not allow."""
    refuse_unpermitted_settings(settings, deployment_allows)


def approval_needed(params: Mapping[str, Any]) -> bool:
    return effective_setting(params, "require_approval", deployment_allows)


def pre_repair_wanted(params: Mapping[str, Any]) -> bool:
    return effective_setting(params, "pre_repair", deployment_allows)


def snapshot_wanted(settings: Mapping[str, Any]) -> bool:
    return effective_setting(settings, "snapshot_before_cleanup", deployment_allows)


def _approvers(setting: str) -> list[HITLUser]:
    """`[ringward] approvers`: user ids, comma-separated, each optionally `id:name` (the name Airflow shows)."""
    users = []
    for entry in (part.strip() for part in setting.split(",")):
        if entry:
            ident, _, name = entry.partition(":")
            users.append(HITLUser(id=ident.strip(), name=(name or ident).strip()))
    return users


def _triggered_by(context: Context) -> str | None:
    return getattr(context.get("dag_run"), "triggering_user_name", None) or None


class MigrationApprovalOperator(ApprovalOperator):
    """Approve or reject, answered by someone other than the run's triggerer (unless the deployment allows
    self-approval); the body ends with the run's settings that differ from the safe defaults.

    `cluster` (the declared cluster's name, None for the single cluster) and `cassandra_conn_id` give the waiting
    gauge its `cluster` tag (`ringward.clusters.metrics_cluster`)."""

    def __init__(
        self, *, cluster: str | None = None, cassandra_conn_id: str = RingwardCassandraHook.default_conn_name,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.cluster = cluster
        self.cassandra_conn_id = cassandra_conn_id

    def execute(self, context: Context) -> Any:
        triggered_by = _triggered_by(context)
        allow_self = deployment_allows(SELF_APPROVAL)
        self.body = f"{self.body or ''}\n\n{run_settings_markdown(dict(context.get('params') or {}), triggered_by)}"
        if not allow_self:
            self.body += ("\n\nThe person who triggered this run cannot approve it: another person answers "
                          "(an approval by the triggerer fails this task).")  # fmt: skip
        approvers = _approvers(str(conf.get(SECTION, APPROVERS, fallback="") or ""))
        if approvers:
            if not allow_self:
                approvers = [u for u in approvers if triggered_by not in {u["id"], u["name"]}]
            if not approvers:
                raise AirflowFailException(str(MigrationError(
                    f"{triggered_by} triggered this run and is the only user `[{SECTION}] {APPROVERS}` names: "
                    "nobody else may approve it.",
                    f"An administrator adds another approver to `[{SECTION}] {APPROVERS}`, then clear this task; "
                    f"or allows self-approval: {config_name(SELF_APPROVAL)}.",
                )))  # fmt: skip
            self.assigned_users = approvers  # Airflow then accepts an answer only from them
        emit_approval(context, self.task_id, datetime.now(UTC), self.metrics_cluster)  # gauge
        return super().execute(context)

    @property
    def metrics_cluster(self) -> str:
        """The waiting gauge's `cluster` tag: the declared cluster's name, else the CQL connection id."""
        return metrics_cluster(self.cluster, self.cassandra_conn_id)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        emit_approval(context, self.task_id, None, self.metrics_cluster)  # answered: 0
        if "error" not in event and list(event.get("chosen_options") or []) == [self.APPROVE]:
            refusal = approver_refusal(
                _triggered_by(context), event.get("responded_by_user"), allow_self=deployment_allows(SELF_APPROVAL)
            )
            if refusal is not None:
                self.log.error("The approval does not count:\n%s", refusal)
                raise AirflowFailException(str(refusal))
        return super().execute_complete(context, event)
