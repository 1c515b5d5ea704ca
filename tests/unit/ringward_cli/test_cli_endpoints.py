"""`ringward endpoints` prints replicas like `nodetool getendpoints`."""

from __future__ import annotations

import pytest
from ringward.errors import ConfigurationError
from ringward.ring import Node, Ring
from ringward_cli import main as cli
from ringward_cli.commands import endpoints

SEED_RING = Ring.of(
    [
        Node(
            "172.24.0.3",
            "dc1",
            "rack1",
            (-8556096403387275620, -3855495865544340301, -2848014410424999526, 2896250345574616760),
        ),
        Node(
            "172.24.0.2",
            "dc1",
            "rack1",
            (-8151920490432810868, -433108085672519511, 8824499221154258863, 9216178714344602529),
        ),
        Node(
            "172.24.0.4",
            "dc1",
            "rack2",
            (-443119614084012, 3123411945676703294, 3785937351724272180, 6479672427606371611),
        ),
    ]
)


@pytest.fixture
def seed_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endpoints, "_load_ring", lambda source: SEED_RING)


@pytest.mark.usefixtures("seed_ring")
@pytest.mark.parametrize(
    ("replication", "expected"),
    [
        ('{"class": "SimpleStrategy", "replication_factor": 2}', "172.24.0.3\n172.24.0.2\n"),
        ('{"class": "NetworkTopologyStrategy", "dc1": 2}', "172.24.0.3\n172.24.0.4\n"),
    ],
)
def test_prints_seed_getendpoints(replication: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["endpoints", "--ring", "seed", "--replication", replication, "--token=-4069959284402364209"])
    assert code == 0
    assert capsys.readouterr().out == expected


@pytest.mark.usefixtures("seed_ring")
def test_refuses_bad_replication_with_a_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["endpoints", "--ring", "seed", "--replication", '{"class": "LocalStrategy"}', "--token", "1"])
    assert code == 2
    assert "Fix:" in capsys.readouterr().err


@pytest.mark.usefixtures("seed_ring")
def test_refuses_values_that_do_not_match_types(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "endpoints",
            "--ring",
            "seed",
            "--replication",
            '{"class": "SimpleStrategy", "replication_factor": 1}',
            "--type",
            "int",
            "--type",
            "text",
            "1",
        ]
    )
    assert code == 2
    assert "2 key column type(s) but 1 value(s)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.0.0.1", ("10.0.0.1", 9042)),
        ("cassandra-1:19042", ("cassandra-1", 19042)),
        ("[::1]:9043", ("::1", 9043)),
        ("::1", ("::1", 9042)),
    ],
)
def test_contact_point_forms(text: str, expected: tuple[str, int]) -> None:
    assert endpoints.contact_point(text) == expected


def test_contact_point_refuses_garbage() -> None:
    with pytest.raises(ConfigurationError, match="neither an existing ring file nor a contact point"):
        endpoints.contact_point("host:port")


def test_missing_ring_file_is_not_taken_for_a_host() -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        endpoints._load_ring("rings/missing.json")
