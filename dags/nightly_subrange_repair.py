"""nightly_subrange_repair (one per cluster of $RINGWARD_CLUSTERS): built by ringward_airflow.dag_factory;
docs/operators-guide.md, 0.1a. Settings: the YAML file named by $RINGWARD_REPAIR_CONFIG."""

from ringward_airflow.dag_factory import cluster_dags

globals().update(cluster_dags("nightly_subrange_repair"))
