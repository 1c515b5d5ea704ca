"""StatsD gauge lines as Airflow sends them with InfluxDB-style tags (`[metrics] statsd_influxdb_enabled`),
`prefix.name,key=value,...:value|g`, read back by the tests that receive them on a loopback UDP socket."""

from __future__ import annotations

Gauge = tuple[str, tuple[tuple[str, str], ...], float]  # (name, its tags in the order sent, value)


def gauges(datagram: str) -> list[Gauge]:
    """The gauge lines of one datagram (other kinds, counters and timers, are left out)."""
    found = []
    for line in datagram.splitlines():
        head, _, rest = line.partition(":")
        value, _, kind = rest.partition("|")
        if kind != "g":
            continue
        name, *tags = head.split(",")
        pairs = tuple((key, tag_value) for key, _, tag_value in (tag.partition("=") for tag in tags))
        found.append((name, pairs, float(value)))
    return found
