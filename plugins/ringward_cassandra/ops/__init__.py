"""ringward_ops on Cassandra, one store per record kind (leases, migrations and their journal, controller pauses,
repair history, run plans, run progress, repair runs, preview findings, the pause switch, the schema), each
implementing its storage Protocol (`ringward.migration_storage`, `ringward.repair`); `ringward_cassandra.ops_store`
composes them into `OpsStore`.

`layout` is the tables' cell layout shared with the in-memory store (pure); `_cql` the driver helpers the
Cassandra stores share. Importing this package imports no driver (the in-memory store runs without one).
"""
