"""Cassandra releases as the nodes report them (`release_version` of system.local and system.peers), and
what ringward does on each: 5.0, 4.1 and 4.0 fully; 3.11 read-only (plans, no change started).

docs/cassandra-versions.md is the table of what differs per release.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ringward.errors import ClusterError

__all__ = ["CASSANDRA_5_0", "OLDEST_WRITABLE", "CassandraRelease", "cluster_release"]

_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:[.\-].*)?$")


@dataclass(frozen=True, order=True)
class CassandraRelease:
    """A release line (major.minor); `text` keeps what the node reported, e.g. "3.11.19"."""

    major: int
    minor: int
    text: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str) -> CassandraRelease:
        match = _RELEASE.match(text.strip())
        if match is None:
            raise ClusterError(
                f"Cassandra release {text!r} is not a version like 4.1.10.",
                "Check `SELECT release_version FROM system.local` on the node.",
            )
        return cls(int(match.group(1)), int(match.group(2)), text.strip())

    def __str__(self) -> str:
        return self.text or f"{self.major}.{self.minor}"

    @property
    def line(self) -> str:
        """The release line, e.g. "3.11"."""
        return f"{self.major}.{self.minor}"

    @property
    def prepares_replication_options(self) -> bool:
        """ALTER reads the request against the current options (`prepareOptions`, the NTS `replication_factor`
        shorthand): new in 4.0 (CASSANDRA-14303). 3.11 stores the requested map as given."""
        return self >= CassandraRelease(4, 0)

    @property
    def has_default_keyspace_rf(self) -> bool:
        """cassandra.yaml's `default_keyspace_rf` fills a request without a factor: new in 4.1."""
        return self >= CassandraRelease(4, 1)

    @property
    def is_read_only(self) -> bool:
        """ringward plans but starts no change on it (below `OLDEST_WRITABLE`)."""
        return self < OLDEST_WRITABLE


CASSANDRA_5_0 = CassandraRelease(5, 0, "5.0")
# The oldest line ringward changes: 3.11 has no preview repair to verify with, no `sjk` to abort repairs
# through, and no Java 8 to test it on here (docs/cassandra-versions.md).
OLDEST_WRITABLE = CassandraRelease(4, 0, "4.0")


def cluster_release(versions: Mapping[str, Sequence[str]]) -> CassandraRelease:
    """The one release every node runs (`versions`: release -> node addresses, as `release_versions` reads
    them); a mixed cluster is refused before this (`cluster_health.refuse_mixed_versions`)."""
    if len(versions) != 1:
        raise ClusterError(
            f"Expected every node on one Cassandra release, found {sorted(versions) or 'none'}.",
            "Finish the upgrade (every node on one release, `nodetool version`), then retry.",
        )
    return CassandraRelease.parse(next(iter(versions)))
