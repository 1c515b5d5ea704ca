"""The local cluster's AutoRepair option: topology key, cassandra.yaml settings, the JVM flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ringward.errors import ConfigurationError
from ringward_cassandra.localcluster import cluster as cluster_module
from ringward_cassandra.localcluster.config import write_node_config
from ringward_cassandra.localcluster.topology import load_topology


def test_the_autorepair_preset_turns_on_full_and_incremental(tmp_path: Path) -> None:
    topology = load_topology("autorepair")
    assert topology.auto_repair == ("full", "incremental")
    conf = write_node_config(topology, topology.nodes[0], tmp_path / "node2", cluster_name="ringward")
    settings = yaml.safe_load((conf / "cassandra.yaml").read_text())
    assert settings["auto_repair"] == {
        "enabled": True,
        "repair_type_overrides": {"full": {"enabled": True}, "incremental": {"enabled": True}},
    }


def test_other_presets_leave_autorepair_off(tmp_path: Path) -> None:
    topology = load_topology("seed")
    assert topology.auto_repair == ()
    conf = write_node_config(topology, topology.nodes[0], tmp_path / "node2", cluster_name="ringward")
    assert "auto_repair" not in yaml.safe_load((conf / "cassandra.yaml").read_text())


def test_an_unknown_repair_type_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    node = {"address": "127.0.0.2", "datacenter": "dc1", "rack": "r1", "num_tokens": 4}
    path.write_text(json.dumps({"auto_repair": ["full", "nightly"], "nodes": [node]}))
    with pytest.raises(ConfigurationError) as refusal:
        load_topology(str(path))
    assert "nightly" in refusal.value.problem and "preview_repaired" in refusal.value.fix


def test_autorepair_settings_merge_over_the_types_it_turns_on(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    node = {"address": "127.0.0.2", "datacenter": "dc1", "rack": "r1", "num_tokens": 4}
    settings = {
        "repair_check_interval": "5s",
        "repair_type_overrides": {"full": {"enabled": False, "initial_scheduler_delay": "5s"}},
    }
    path.write_text(json.dumps({"auto_repair": ["full"], "auto_repair_settings": settings, "nodes": [node]}))
    topology = load_topology(str(path))
    conf = write_node_config(topology, topology.nodes[0], tmp_path / "node2", cluster_name="ringward")
    assert yaml.safe_load((conf / "cassandra.yaml").read_text())["auto_repair"] == {
        "enabled": True,
        "repair_check_interval": "5s",
        "repair_type_overrides": {"full": {"enabled": False, "initial_scheduler_delay": "5s"}},
    }


def test_autorepair_settings_without_types_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    node = {"address": "127.0.0.2", "datacenter": "dc1", "rack": "r1", "num_tokens": 4}
    path.write_text(json.dumps({"auto_repair_settings": {"repair_check_interval": "5s"}, "nodes": [node]}))
    with pytest.raises(ConfigurationError) as refusal:
        load_topology(str(path))
    assert "auto_repair_settings" in refusal.value.problem


def test_nodes_start_with_the_autorepair_flag_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    class Recorded:
        pid = 0

        def __init__(self, command: list[str], **_: object) -> None:
            started.append(command)

    monkeypatch.setattr(cluster_module, "_check_free", lambda node: None)
    monkeypatch.setattr(cluster_module.subprocess, "Popen", Recorded)
    monkeypatch.setattr(cluster_module.runtime, "cassandra_classpath", lambda conf, version=None: "cp")
    monkeypatch.setattr(cluster_module.runtime, "java_binary", lambda: "java")
    local = cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)
    try:
        for name in ("autorepair", "seed"):
            topology = load_topology(name)
            local._spawn(topology, topology.nodes[0], heap_mb=256)
    finally:
        cluster_module._CHILDREN.pop(0, None)
    assert "-Dcassandra.autorepair.enable=true" in started[0]
    assert "-Dcassandra.autorepair.enable=true" not in started[1]


def test_every_node_of_a_local_cluster_is_a_seed(tmp_path: Path) -> None:
    """`Topology.addresses` is every node, and the seed provider lists them all ("seed" the preset names the
    seed article's cluster, not a subset of seed nodes)."""
    topology = load_topology("two-dc")
    assert topology.addresses == [node.address for node in topology.nodes] and len(topology.addresses) > 3
    conf = write_node_config(topology, topology.nodes[-1], tmp_path / "node", cluster_name="ringward")
    (provider,) = yaml.safe_load((conf / "cassandra.yaml").read_text())["seed_provider"]
    assert provider["parameters"] == [{"seeds": ",".join(topology.addresses)}]
