"""Run settings that give up a safety step, the deployment's permission, the approver shown the run's settings."""

from __future__ import annotations

import pytest
from ringward.errors import ConfigurationError
from ringward.governance import (
    GUARDED_SETTINGS,
    RUN_DEFAULTS,
    approver_refusal,
    effective_setting,
    refuse_unpermitted_settings,
    run_settings_markdown,
    settings_differing,
    unsafe_settings,
)

UNSAFE = {"require_approval": False, "pre_repair": False, "snapshot_before_cleanup": False, "allow_quorum_gap": True}
PERMISSIONS = {
    "require_approval": "allow_unapproved_migrations",
    "pre_repair": "allow_skipping_pre_repair",
    "snapshot_before_cleanup": "allow_cleanup_without_snapshot",
    "allow_quorum_gap": "allow_quorum_gap",
}


def nothing_allowed(key: str) -> bool:
    return False


def test_the_defaults_are_safe_and_every_guarded_setting_has_its_permission() -> None:
    assert unsafe_settings(RUN_DEFAULTS) == []
    assert {g.name: g.permission for g in GUARDED_SETTINGS} == PERMISSIONS
    assert {g.name: RUN_DEFAULTS[g.name] for g in GUARDED_SETTINGS} == {g.name: g.safe for g in GUARDED_SETTINGS}


@pytest.mark.parametrize(("name", "value"), sorted(UNSAFE.items()))
def test_each_unsafe_setting_is_refused_naming_it_and_the_deployment_setting(name: str, value: bool) -> None:
    with pytest.raises(ConfigurationError) as refused:
        refuse_unpermitted_settings({**RUN_DEFAULTS, name: value}, nothing_allowed)
    text = str(refused.value)
    assert f"{name}={str(value).lower()}" in refused.value.problem
    key = PERMISSIONS[name]
    assert f"`[ringward] {key} = True`" in refused.value.fix and f"AIRFLOW__RINGWARD__{key.upper()}" in text
    # the form's strings count as the booleans they spell
    with pytest.raises(ConfigurationError):
        refuse_unpermitted_settings({name: str(value).lower()}, nothing_allowed)


def test_a_permitted_setting_passes_and_only_the_unpermitted_ones_are_named() -> None:
    refuse_unpermitted_settings(UNSAFE, lambda key: True)
    with pytest.raises(ConfigurationError) as refused:
        refuse_unpermitted_settings(UNSAFE, lambda key: key == "allow_unapproved_migrations")
    assert "require_approval" not in refused.value.problem
    assert {"pre_repair", "snapshot_before_cleanup", "allow_quorum_gap"} <= set(
        part.split("=")[0].strip(" :") for part in refused.value.problem.split(": ", 1)[1].split("; ")
    )


def test_a_stage_acts_on_the_safe_value_unless_the_deployment_allows_the_other() -> None:
    assert effective_setting({"pre_repair": False}, "pre_repair", nothing_allowed) is True
    assert (
        effective_setting({"pre_repair": "false"}, "pre_repair", lambda key: key == "allow_skipping_pre_repair")
        is False
    )
    assert effective_setting({}, "require_approval", lambda key: True) is True
    assert effective_setting({"require_approval": True}, "require_approval", nothing_allowed) is True


def test_the_approver_sees_every_setting_off_its_default_and_who_triggered() -> None:
    settings = {**RUN_DEFAULTS, "keyspace": "orders", "pre_repair": False, "repair_parallelism": 4,
                "node_capacity": {"dc1": "2TiB"}, "dry_run": "false"}  # fmt: skip
    assert [name for name, _, _ in settings_differing(settings)] == ["pre_repair", "repair_parallelism",
                                                                      "node_capacity"]  # fmt: skip
    text = run_settings_markdown(settings, "alice")
    assert "triggered by `alice`" in text
    assert "| `pre_repair` **(gives up a safety step)** | `false` | `true` |" in text
    assert "| `repair_parallelism` | `4` | `2` |" in text and "node_capacity" in text
    assert "dry_run" not in text and "keyspace" not in text
    assert "allow_skipping_pre_repair" in text
    assert "at its safe default" in run_settings_markdown(RUN_DEFAULTS, None)
    assert "an unknown user" in run_settings_markdown(RUN_DEFAULTS, None)


def test_the_triggerer_cannot_approve_unless_the_deployment_allows_it() -> None:
    alice = {"id": "1", "name": "alice"}
    refusal = approver_refusal("alice", alice, allow_self=False)
    assert refusal is not None and "alice triggered this run and approved it" in refusal.problem
    assert "AIRFLOW__RINGWARD__ALLOW_SELF_APPROVAL" in refusal.fix
    assert approver_refusal("alice", {"id": "2", "name": "bob"}, allow_self=False) is None
    assert approver_refusal("alice", alice, allow_self=True) is None
    # who cannot be told apart does not count
    unknown = approver_refusal(None, alice, allow_self=False)
    assert unknown is not None and "did not record who triggered" in unknown.problem
    assert approver_refusal("alice", None, allow_self=False) is not None


def test_a_user_name_in_the_refusal_cannot_forge_log_lines() -> None:
    """User names come from the auth manager; the refusal goes to the task log as the precheck's cluster names do:
    one line, control characters escaped."""
    forged = "mallory\n[2026-11-28 00:00:00] INFO - approved by bob\x1b[2K"
    refusal = approver_refusal(forged, {"id": "9", "name": forged}, allow_self=False)
    assert refusal is not None
    assert "\n" not in refusal.problem and "\x1b" not in refusal.problem
    assert refusal.problem.startswith("mallory\\n[2026-11-28 00:00:00] INFO - approved by bob\\x1b[2K triggered")
