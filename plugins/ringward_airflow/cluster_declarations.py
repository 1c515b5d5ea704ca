"""Where the clusters file is named and read: the one source the DAG factory (`dag_factory.cluster_dags`) and the
pages (`ui/app.py`: the cluster picker, each cluster's connection and DAG ids) both take the clusters from.

Light on purpose (Airflow's configuration and `ringward.clusters` only): the API server imports it for the pages
without importing the operators."""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk.configuration import conf
from ringward.clusters import ClusterDeclaration, ClusterTarget, cluster_targets, load_clusters
from ringward.governance import SECTION

__all__ = ["CLUSTERS_ENV", "CLUSTERS_FILE_KEY", "clusters_file", "declared_clusters", "page_clusters"]

# Where the clusters file is named: the environment variable first, then Airflow's configuration.
CLUSTERS_ENV = "RINGWARD_CLUSTERS"
CLUSTERS_FILE_KEY = "clusters_file"


def clusters_file() -> str | None:
    """The clusters file: `$RINGWARD_CLUSTERS`, else `[ringward] clusters_file` in Airflow's configuration
    (airflow.cfg or AIRFLOW__RINGWARD__CLUSTERS_FILE); None when neither is set."""
    named = os.environ.get(CLUSTERS_ENV) or conf.get(SECTION, CLUSTERS_FILE_KEY, fallback="") or ""
    return str(named).strip() or None


def declared_clusters(path: str | Path | None = None) -> tuple[ClusterDeclaration, ...]:
    """The clusters the file declares (`path`, else `clusters_file()`); empty without a clusters file.
    An unreadable or invalid file raises ConfigurationError naming the problem and the fix."""
    file = path if path is not None else clusters_file()
    return () if file is None else load_clusters(file)


def page_clusters(path: str | Path | None = None) -> tuple[ClusterTarget, ...]:
    """The clusters the pages serve, from the same declarations as the DAGs: one per declared cluster, else the
    single cluster (today's DAG ids, `cassandra_default`)."""
    return cluster_targets(declared_clusters(path))
