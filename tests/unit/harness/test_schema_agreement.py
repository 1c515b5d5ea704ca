"""tests/integration/schema_agreement.py: which nodes the harness's wait for schema agreement counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
MAIN, ODD = "5a48541e-6be9-320c-8586-691e476514a5", "2d3ed3f1-37e4-3148-9707-d86a324864a4"


@pytest.fixture(scope="module")
def agreement() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT / "tests" / "integration"))
        import schema_agreement

        yield schema_agreement


class DcLocalSession:
    """A session of a dc1-local policy on a two-DC cluster, as the driver keeps it: pools only to dc1's nodes
    (`is_up` True), the dc2 nodes known from the control connection but never connected (`is_up` None), one node
    marked down. Answers as 127.0.0.2 sees the cluster: 127.0.0.6 (dc2) alone on an old schema version."""

    def __init__(self, odd_is_up: bool | None) -> None:
        def host(address: str, is_up: bool | None) -> Any:
            return SimpleNamespace(address=address, is_up=is_up)

        self.dc1 = [host("127.0.0.2", True), host("127.0.0.3", True)]
        hosts = [*self.dc1, host("127.0.0.5", None), host("127.0.0.6", odd_is_up), host("127.0.0.7", False)]
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(all_hosts=lambda: hosts))

    def get_pool_state(self) -> list[Any]:  # the driver's is a dict keyed by host: iterated, its hosts
        return list(self.dc1)

    def execute(self, query: str, timeout: float = 0, host: Any = None) -> Any:
        if "system.local" in query:
            return SimpleNamespace(one=lambda: SimpleNamespace(schema_version=MAIN))
        peers = {"127.0.0.3": MAIN, "127.0.0.5": MAIN, "127.0.0.6": ODD, "127.0.0.7": ODD}
        return [SimpleNamespace(peer=peer, schema_version=version) for peer, version in peers.items()]


def test_a_node_of_the_other_datacenter_alone_on_its_version_is_a_disagreement(agreement: ModuleType) -> None:
    """The dc2 node the session never connected to counts (the driver's own wait counts it too); the node the
    driver knows is down does not."""
    session = DcLocalSession(odd_is_up=None)
    assert agreement._versions(session) == {"127.0.0.2": MAIN, "127.0.0.3": MAIN, "127.0.0.5": MAIN, "127.0.0.6": ODD}
    assert not agreement._agreed_within(session, 0)


def test_a_node_known_down_does_not_hold_the_wait(agreement: ModuleType) -> None:
    assert agreement._agreed_within(DcLocalSession(odd_is_up=False), 0)
