"""Connection settings for Airflow's SQLite metadata database (`ringward airflow`, the demo, the tests' stacks).

Airflow opens SQLite in WAL mode: readers never wait, but one writer at a time holds the database, and Python's
sqlite3 gives up on that lock after 5 s ("database is locked", which Airflow's API answers with a 500 "Database
error"). A scheduler, a dag-processor, a triggerer, task processes and the API server all write to the one file;
on a loaded two-core machine a write waited longer than 5 s (the trigger of a migration while another cluster's
night ran, CI 2026-11-30). A minute is far beyond a healthy write and still ends a wedged one with an error.

Airflow imports these through `[database] sql_alchemy_connect_args` and `sql_alchemy_connect_args_async`
(`airflow.settings._get_connect_args`); it adds `check_same_thread` to the synchronous dict itself, so each engine
gets its own.
"""

from __future__ import annotations

LOCK_WAIT_SECONDS = 60.0

SYNC_CONNECT_ARGS: dict[str, object] = {"timeout": LOCK_WAIT_SECONDS}
ASYNC_CONNECT_ARGS: dict[str, object] = {"timeout": LOCK_WAIT_SECONDS}
