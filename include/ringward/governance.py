"""Which run settings of a migration weaken its safety, who may allow them, and what the approver is shown.

A run setting (a param of `keyspace_migration`) is chosen by whoever triggers the run. The approval, the
repair before the ALTER, the snapshot before cleanup and the QUORUM overlap of a staged change are controls,
not preferences: a run may give one up only when the deployment allows it, with a setting in the `[ringward]`
section of Airflow's configuration (airflow.cfg, or the `AIRFLOW__RINGWARD__<KEY>` environment variable) that
only the people who run Airflow can change. A DAG editor or anyone who may trigger a run cannot.

Pure decisions only: the Airflow side (`ringward_airflow.governance`) reads the configuration and calls these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ringward.errors import ConfigurationError, MigrationError
from ringward.markdown import markdown_code, markdown_escape
from ringward.text import log_safe

__all__ = [
    "APPROVERS",
    "GUARDED_SETTINGS",
    "RUN_DEFAULTS",
    "RUN_LIMITS",
    "SECTION",
    "SELF_APPROVAL",
    "GuardedSetting",
    "approver_refusal",
    "config_name",
    "effective_setting",
    "refuse_unpermitted_settings",
    "run_settings_markdown",
    "settings_differing",
    "unsafe_settings",
]

SECTION = "ringward"  # the section of Airflow's configuration the deployment settings live in
SELF_APPROVAL = "allow_self_approval"  # the person who triggered a run may approve it (single-operator automation)
APPROVERS = "approvers"  # the only users who may answer a migration's approvals (Airflow's assigned_users)


def config_name(key: str) -> str:
    """How an administrator sets `key`: the airflow.cfg entry and its environment variable."""
    variable = f"AIRFLOW__{SECTION.upper()}__{key.upper()}"
    return f"`[{SECTION}] {key} = True` in airflow.cfg (or the environment variable {variable})"


@dataclass(frozen=True)
class GuardedSetting:
    """A run setting whose non-default value gives up a safety step, and the deployment setting allowing it."""

    name: str  # the run param
    safe: bool  # its safe (default) value
    permission: str  # the key in [ringward] that allows the other value
    risk: str  # what the other value gives up


GUARDED_SETTINGS: tuple[GuardedSetting, ...] = (
    GuardedSetting("require_approval", True, "allow_unapproved_migrations",
                   "no second person sees the plan before the ALTER and the cleanup"),
    GuardedSetting("pre_repair", True, "allow_skipping_pre_repair",
                   "the ranges are not repaired on their current replicas first: the new replicas may stream "
                   "from a replica that misses writes"),
    GuardedSetting("snapshot_before_cleanup", True, "allow_cleanup_without_snapshot",
                   "cleanup deletes the former replicas' copies with no snapshot to restore them from"),
    GuardedSetting("allow_quorum_gap", False, "allow_quorum_gap",
                   "QUORUM reads may miss acknowledged writes between a step's ALTER and its repair"),
)  # fmt: skip

# Every run setting of keyspace_migration and its default (the DAG's params take theirs from here). The target
# (keyspace, replication, rollback_of) has none: it is always shown.
RUN_DEFAULTS: Mapping[str, Any] = {
    "require_approval": True,
    "pre_repair": True,
    "client_read_consistency": "LOCAL_QUORUM",
    "dry_run": False,
    "cleanup": True,
    "require_cleanup_approval": False,
    "snapshot_before_cleanup": True,
    "repair_parallelism": 2,
    "repair_session_timeout": 3600,
    "deferrable": True,
    "allow_quorum_gap": False,
    "node_capacity": {},
    "node_wait_seconds": 600,
}

# The bounds of keyspace_migration's numeric run settings (the DAG's params carry them as minimum and maximum:
# Airflow refuses a run outside them, naming the param and the bound). They are what the blocking repair's
# RepairConfig accepts: at most 100,000 sessions at once (`parallel_repair_count`) and 3650 days for a duration
# (the repair settings' MAX_DURATION); beyond them the repair task failed on a pydantic error mid-migration.
RUN_LIMITS: Mapping[str, tuple[int, int]] = {
    "repair_parallelism": (1, 100_000),
    "repair_session_timeout": (10, 3650 * 86400),
    "node_wait_seconds": (0, 3650 * 86400),
}

Permitted = Callable[[str], bool]  # a deployment setting's key -> whether it is on


def _flag(value: Any) -> bool:
    """A form's or a template's boolean ("false" renders as a string with render_template_as_native_obj off)."""
    return value if isinstance(value, bool) else str(value).strip().lower() in {"1", "true", "yes", "on"}


def unsafe_settings(settings: Mapping[str, Any]) -> list[GuardedSetting]:
    """The guarded settings `settings` moves off their safe value (a setting not given keeps its default)."""
    return [g for g in GUARDED_SETTINGS if g.name in settings and _flag(settings[g.name]) is not g.safe]


def refuse_unpermitted_settings(settings: Mapping[str, Any], permitted: Permitted) -> None:
    """ConfigurationError naming every unsafe setting of the run the deployment does not allow, and the
    deployment setting that would; returns when there is none."""
    refused = [g for g in unsafe_settings(settings) if not permitted(g.permission)]
    if not refused:
        return
    problems = "; ".join(f"{g.name}={str(not g.safe).lower()} ({g.risk})" for g in refused)
    raise ConfigurationError(
        f"This run asks for settings that give up a safety step, and this Airflow deployment does not allow "
        f"them: {problems}. Run settings cannot weaken a migration on their own.",
        "Trigger the run without " + ", ".join(f"`{g.name}`" for g in refused)
        + " (the defaults are safe), or have an Airflow administrator allow it for the deployment: "
        + "; ".join(config_name(g.permission) for g in refused) + ".",
    )  # fmt: skip


def effective_setting(settings: Mapping[str, Any], name: str, permitted: Permitted) -> bool:
    """The value a stage acts on: the run's, when it is safe or the deployment allows it, else the safe one."""
    guarded = next(g for g in GUARDED_SETTINGS if g.name == name)
    asked = _flag(settings.get(name, guarded.safe))
    return asked if asked is guarded.safe or permitted(guarded.permission) else guarded.safe


def settings_differing(
    settings: Mapping[str, Any], defaults: Mapping[str, Any] = RUN_DEFAULTS
) -> list[tuple[str, Any, Any]]:
    """(name, this run's value, default) of every run setting that is not at its default, in `defaults` order."""
    differing = []
    for name, default in defaults.items():
        if name not in settings:
            continue
        value = settings[name]
        same = _flag(value) is default if isinstance(default, bool) else value == default or str(value) == str(default)
        if not same:
            differing.append((name, value, default))
    return differing


def run_settings_markdown(settings: Mapping[str, Any], triggered_by: str | None) -> str:
    """What the approver reads about the run itself: who triggered it, and every setting off its default
    (those giving up a safety step marked, with what they give up)."""
    who = markdown_code(triggered_by) if triggered_by else "an unknown user"
    lines = [f"### Run settings (triggered by {who})", ""]
    differing = settings_differing(settings)
    if not differing:
        lines.append("Every run setting is at its safe default.")
        return "\n".join(lines)
    guarded = {g.name: g for g in unsafe_settings(settings)}
    lines += ["| Setting | This run | Default |", "|---|---|---|"]
    for name, value, default in differing:
        mark = " **(gives up a safety step)**" if name in guarded else ""
        lines.append(f"| `{name}`{mark} | {markdown_code(_shown(value))} | {markdown_code(_shown(default))} |")
    for name, setting in guarded.items():
        lines.append(
            f"\n**`{name}`**: {markdown_escape(setting.risk)} (allowed by `[{SECTION}] {setting.permission}`)."
        )
    return "\n".join(lines)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def approver_refusal(
    triggered_by: str | None, responder: Mapping[str, Any] | None, *, allow_self: bool
) -> MigrationError | None:
    """Why the approval of `responder` does not count, None when it does.

    `triggered_by` is the run's triggering user's name (Airflow records it for a trigger from the UI, the REST
    API and the CLI); `responder` the user Airflow recorded as answering ({"id", "name"}). The approver must be
    another person, unless the deployment allows self-approval; an unknown triggerer or responder cannot be
    told apart, so it does not count either."""
    if allow_self:
        return None
    fix = (f"Another person approves: clear this approval task to ask again. For single-operator automation an "
           f"Airflow administrator may allow self-approval: {config_name(SELF_APPROVAL)}.")  # fmt: skip
    name = str((responder or {}).get("name") or "")
    ident = str((responder or {}).get("id") or "")
    if not triggered_by:
        return MigrationError(
            "Airflow did not record who triggered this run, so it cannot tell that the approver is someone else.",
            fix,
        )
    if not (name or ident):
        return MigrationError("Airflow did not record who answered the approval.", fix)
    if triggered_by in {name, ident}:
        return MigrationError(
            f"{log_safe(name or ident)} triggered this run and approved it: a migration needs a second person's "
            "approval.",
            fix,
        )
    return None
