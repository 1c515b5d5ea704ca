"""Each node's data_disk_usage_max_disk_size (Cassandra 4.1+), asked of the node itself, for incremental
repair's disk-headroom guard; whatever cannot be read is None (the configured capacity is the fallback)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from cassandra import InvalidRequest
from ringward_cassandra.schema import data_disk_max_sizes


class Answer:
    def __init__(self, rows: list[dict[str, Any]] | Exception) -> None:
        self.rows = rows

    def result(self) -> list[dict[str, Any]]:
        if isinstance(self.rows, Exception):
            raise self.rows
        return self.rows


class PerNodeSettings:
    """system_views.settings as each node answers it: the query must go to the node it is about."""

    def __init__(self, answers: dict[str, list[dict[str, Any]] | Exception]) -> None:
        self.answers = answers
        hosts = [SimpleNamespace(address=address) for address in answers]
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(all_hosts=lambda: hosts))
        self.queries: list[str] = []

    def execute_async(self, query: Any, host: Any = None) -> Answer:
        self.queries.append(query.query_string)
        return Answer(self.answers[host.address])


def test_each_node_says_its_own_size_and_what_it_cannot_say_is_none() -> None:
    session = PerNodeSettings({
        "127.0.0.2": [{"value": "500GiB"}],
        "127.0.0.3": [{"value": None}],  # set to null in cassandra.yaml (the default)
        "127.0.0.4": [],  # 4.0: no such setting
        "127.0.0.5": InvalidRequest("Keyspace system_views does not exist"),  # 3.11
        "127.0.0.6": [{"value": "a lot"}],
    })  # fmt: skip
    sizes = data_disk_max_sizes(session, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "10.9.9.9"])
    assert sizes == {"127.0.0.2": 500 * 2**30, "127.0.0.3": None, "127.0.0.4": None, "127.0.0.5": None,
                     "127.0.0.6": None, "10.9.9.9": None}  # fmt: skip
    assert all("data_disk_usage_max_disk_size" in query for query in session.queries)
