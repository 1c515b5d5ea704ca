"""Mixed Cassandra releases refuse a migration, naming the nodes and releases."""

from __future__ import annotations

import pytest
from ringward.cluster_health import refuse_mixed_versions
from ringward.errors import ClusterError


def test_one_release_everywhere_passes() -> None:
    refuse_mixed_versions({"5.0.9": ["127.0.0.2", "127.0.0.3", "127.0.0.4"]})
    refuse_mixed_versions({})


def test_mixed_releases_are_refused_odd_node_first() -> None:
    with pytest.raises(ClusterError) as refusal:
        refuse_mixed_versions({"5.0.9": ["127.0.0.3", "127.0.0.2"], "4.1.7": ["127.0.0.4"]})
    assert "(4.1.7 on 127.0.0.4; 5.0.9 on 127.0.0.2, 127.0.0.3)" in refusal.value.problem
    assert "Finish the upgrade" in refusal.value.fix
