"""RingwardError text: the problem, then `Fix:` on a line of its own."""

from __future__ import annotations

from ringward.errors import ConfigurationError, format_refusal


def test_problem_and_fix_are_separate_lines() -> None:
    error = ConfigurationError("Keyspace 'x' does not exist.", "Check the name.")
    assert str(error) == "Keyspace 'x' does not exist.\nFix: Check the name."
    assert str(ConfigurationError("No fix known.")) == "No fix known."


def test_a_fix_of_several_lines_starts_below_fix() -> None:
    assert format_refusal("Refused.", "- one.\n- two.") == "Refused.\nFix:\n- one.\n- two."
