"""ResidentNodetool's life cycle without a JVM: once closed it starts nothing and refuses commands (the
JVM's own behaviour is tested against real nodes in tests/integration/test_resident_nodetool.py)."""

from __future__ import annotations

import pytest
from ringward.errors import ClusterError
from ringward_cassandra.resident_nodetool import ResidentNodetool


def test_a_late_start_after_close_starts_no_jvm() -> None:
    # NodetoolClient.prepare() boots the JVM from a thread; if the task closed the client first, that
    # thread must not leave a JVM behind. The classpath is bogus: a start attempt would raise.
    resident = ResidentNodetool(classpath="/nonexistent.jar", java="/nonexistent/java")
    resident.close()
    resident.start()
    assert resident.pid is None


def test_a_closed_resident_nodetool_refuses_commands() -> None:
    resident = ResidentNodetool(classpath="/nonexistent.jar", java="/nonexistent/java")
    resident.close()
    with pytest.raises(ClusterError, match="closed"):
        resident.run(["status"], timeout=5)
