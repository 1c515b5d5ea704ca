"""RingwardError text: the problem, then `Fix:` on a line of its own."""

from __future__ import annotations

import ringward.errors
from ringward.errors import ConfigurationError, format_refusal
from ringward_cassandra.localcluster import LocalClusterError


def test_problem_and_fix_are_separate_lines() -> None:
    error = ConfigurationError("Keyspace 'x' does not exist.", "Check the name.")
    assert str(error) == "Keyspace 'x' does not exist.\nFix: Check the name."
    assert str(ConfigurationError("No fix known.")) == "No fix known."


def test_a_fix_of_several_lines_starts_below_fix() -> None:
    assert format_refusal("Refused.", "- one.\n- two.") == "Refused.\nFix:\n- one.\n- two."


def test_the_local_cluster_error_lives_beside_the_harness_in_the_one_hierarchy() -> None:
    assert "LocalClusterError" not in ringward.errors.__all__
    assert not hasattr(ringward.errors, "LocalClusterError")
    assert issubclass(LocalClusterError, ringward.errors.ClusterError)
    assert str(LocalClusterError("Nodes are still running.", "Run `ringward cluster down` first.")) == (
        "Nodes are still running.\nFix: Run `ringward cluster down` first."
    )
