"""One exception hierarchy for ringward: every refusal names the problem and the fix."""

from __future__ import annotations

__all__ = [
    "ClusterError",
    "ConfigurationError",
    "MigrationError",
    "RepairError",
    "ReplicationError",
    "RingError",
    "RingwardError",
    "UnsafeChangeError",
    "VerificationError",
    "format_refusal",
]


class RingwardError(Exception):
    """Base of every ringward error. `problem` says what is wrong, `fix` what to do about it."""

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(format_refusal(problem, fix))


def format_refusal(problem: str, fix: str = "") -> str:
    """The problem, then the fix on a line of its own; a fix of several lines starts below `Fix:`."""
    if not fix:
        return problem
    return f"{problem}\nFix:\n{fix}" if "\n" in fix else f"{problem}\nFix: {fix}"


class ConfigurationError(RingwardError):
    """Invalid user input: a parameter, a file, a configuration field."""


class RingError(RingwardError):
    """A ring snapshot that cannot be read or is inconsistent."""


class ReplicationError(ConfigurationError):
    """Replication settings that are malformed or unsupported."""


class UnsafeChangeError(RingwardError):
    """A replication change refused by the safety analysis."""


class ClusterError(RingwardError):
    """The live cluster is not in a state ringward can work on."""


class RepairError(RingwardError):
    """A repair session failed, timed out or could not be started."""


class VerificationError(RingwardError):
    """Verification found missing or mismatched data; cleanup must not run."""


class MigrationError(RingwardError):
    """A migration step could not proceed (lease held, schema disagreement, ...)."""
