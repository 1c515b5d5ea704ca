"""The local-cluster harness's own error, kept beside the harness and out of the pure core."""

from __future__ import annotations

from ringward.errors import ClusterError

__all__ = ["LocalClusterError"]


class LocalClusterError(ClusterError):
    """The embedded local cluster could not be started, stopped or reached."""
