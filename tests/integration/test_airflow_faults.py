"""A node dies mid-repair, through the scheduler and the triggerer as deployed: the run finishes on its own.

test_migration_recovery drives the operators one by one; here nothing is driven by hand but the fault. The
migration is triggered through the REST API (`require_approval: false`), its repair defers to the real
triggerer, the repair's coordinator (the gained replica) is killed mid-session and started again 20 s
later, and the run must end in success by itself: the triggerer reports the session dead, Airflow retries
the task after its retry delay, the retry waits for the node and repairs what the journal lacks.
"""

from __future__ import annotations

import threading
import time

from airflow_stack import AirflowStack, topology_under_test
from ringward_cassandra.localcluster import LocalCluster, load_topology
from test_migration_recovery import _fill, _throttle

DAG = "keyspace_migration"
NODES = list(load_topology(topology_under_test("seed")).addresses)  # 127.0.0.2-4, or the lane's own
GAINED = NODES[2]
REPAIR = "step_1.repair"


def test_a_coordinator_killed_mid_repair_does_not_stop_the_run(
    seed_cluster: LocalCluster, airflow_stack: AirflowStack
) -> None:
    keyspace = "sched_faults"
    _fill(rows=6000, body_bytes=1000, keyspace=keyspace, nodes=NODES)  # incompressible: the throttle bites
    airflow_stack.set_paused(DAG, False)
    _throttle(seed_cluster, 1)  # megabit/s: the post-ALTER session streams to the gained replica for a while
    events: dict[str, float] = {}
    try:
        run_id = airflow_stack.trigger(
            DAG,
            {"keyspace": keyspace, "replication": {"class": "NetworkTopologyStrategy", "dc1": 2},
             "require_approval": False, "deferrable": True, "snapshot_before_cleanup": False},
        )  # fmt: skip

        airflow_stack.wait_for_deferral(DAG, run_id, REPAIR)
        time.sleep(3)  # inside the session: validation and streaming under way
        seed_cluster.stop(GAINED, kill=True)
        events["killed"] = time.monotonic()
        restart = threading.Timer(20, seed_cluster.start, args=(GAINED,))
        restart.start()

        def first_try_failed() -> bool:
            return airflow_stack.task_instance(DAG, run_id, REPAIR)["try_number"] >= 2

        airflow_stack.wait_until(first_try_failed, 120, "the dead session to fail the repair's first try",
                                 lambda: airflow_stack.describe(DAG, run_id))  # fmt: skip
        events["first try failed"] = time.monotonic()
        restart.join()
        _throttle(seed_cluster, 0)
        run = airflow_stack.wait_for_state(DAG, run_id, {"success", "failed"}, timeout=900)
        events["run ended"] = time.monotonic()
    finally:
        _throttle(seed_cluster, 0)
    assert run["state"] == "success", airflow_stack.describe(DAG, run_id)
    log = airflow_stack.log(DAG, run_id, REPAIR, 1)
    assert GAINED in log and "cannot finish" in log, log[-3000:]
    assert events["first try failed"] - events["killed"] < 90, "noticed within a minute or so, not after an hour"
    print({name: f"{seconds - events['killed']:.0f} s after the kill" for name, seconds in events.items()})
