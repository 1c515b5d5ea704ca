"""keyspace_migration and keyspace_migration_rollback (one pair per cluster of $RINGWARD_CLUSTERS): built by
ringward_airflow.dag_factory; docs/operators-guide.md, 0.1a."""

from ringward_airflow.dag_factory import cluster_dags

globals().update(cluster_dags("keyspace_migration", "keyspace_migration_rollback"))
