"""The local 5.0 nodes' class data sharing archive (class_archive.py): the first node without one lists its classes,
the archive is made from that list in the background and renamed into place only when complete, later nodes map it;
a node's classpath lists the archived jars first and its conf folder last."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from ringward_cassandra.localcluster import cluster as cluster_module
from ringward_cassandra.localcluster import runtime
from ringward_cassandra.localcluster.class_archive import STALE_CLAIM_SECONDS, NodeClassArchive
from ringward_cassandra.localcluster.topology import load_topology

FAKE_JAVA = """#!/bin/sh
# Writes what a dump would: the file -XX:SharedArchiveFile names, from the list -XX:SharedClassListFile names.
for arg in "$@"; do
  case "$arg" in
    -XX:SharedArchiveFile=*) out="${arg#-XX:SharedArchiveFile=}" ;;
    -XX:SharedClassListFile=*) list="${arg#-XX:SharedClassListFile=}" ;;
  esac
done
[ -n "$FAIL" ] && { echo "dump failed" >&2; : > "$out"; exit 1; }
cat "$list" > "$out"
"""


def fake_java(tmp_path: Path) -> str:
    java = tmp_path / "java"
    java.write_text(FAKE_JAVA)
    java.chmod(0o755)
    return str(java)


def test_the_first_start_lists_its_classes_the_next_map_the_archive_made_from_the_list(tmp_path: Path) -> None:
    archive = NodeClassArchive(fake_java(tmp_path), ["a.jar", "b.jar"], tmp_path / "cds")
    first = archive.jvm_options()
    assert first == [f"-XX:DumpLoadedClassList={archive.class_list}"] and archive.writes_class_list(first)
    assert archive.jvm_options() == []  # another start meanwhile: the list is being written, no archive yet
    archive.class_list.write_text("java/lang/Object\n")  # what the node's JVM wrote
    dump = archive.make_in_background(lambda _: None)
    assert dump is not None and dump.wait(30) == 0
    assert archive.archive.read_text() == "java/lang/Object\n" and not list(archive.folder.glob("*.partial"))
    assert archive.jvm_options() == [f"-XX:SharedArchiveFile={archive.archive}"]
    assert archive.make_in_background(lambda _: None) is None  # made once


def test_a_failed_dump_leaves_no_archive_and_a_stale_claim_is_taken_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = NodeClassArchive(fake_java(tmp_path), ["a.jar"], tmp_path / "cds")
    assert archive.writes_class_list(archive.jvm_options())
    archive.class_list.write_text("x\n")
    monkeypatch.setenv("FAIL", "1")
    dump = archive.make_in_background(lambda _: None)
    assert dump is not None and dump.wait(30) == 0  # the shell's last command: the partial file removed
    assert not archive.archive.exists() and not list(archive.folder.glob("*.partial"))
    assert archive.jvm_options() == []  # claimed by the start that failed, for a while
    old = time.time() - STALE_CLAIM_SECONDS - 1
    claim = next(archive.folder.glob("*.claim"))
    os.utime(claim, (old, old))
    assert archive.writes_class_list(archive.jvm_options())


def test_another_jdk_or_other_jars_have_an_archive_of_their_own(tmp_path: Path) -> None:
    java = fake_java(tmp_path)
    one = NodeClassArchive(java, ["a.jar"], tmp_path)
    assert one.archive == NodeClassArchive(java, ["a.jar"], tmp_path).archive
    assert one.archive != NodeClassArchive(java, ["a.jar", "b.jar"], tmp_path).archive
    assert one.archive != NodeClassArchive("/usr/bin/true", ["a.jar"], tmp_path).archive


def spawn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str) -> tuple[list[str], Any]:
    started: list[list[str]] = []

    class Recorded:
        pid = 0

        def __init__(self, command: list[str], **_: object) -> None:
            started.append(command)

    monkeypatch.setenv("RINGWARD_HOME", str(tmp_path))  # .cache/cds under it
    monkeypatch.setattr(cluster_module, "_check_free", lambda node: None)
    monkeypatch.setattr(cluster_module.subprocess, "Popen", Recorded)
    monkeypatch.setattr(runtime, "cassandra_classpath", lambda conf, version=None: f"{conf}:/j/a.jar:/j/b.jar")
    monkeypatch.setattr(runtime, "java_binary", lambda: "/usr/bin/java")
    local = cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)
    local.root.mkdir(parents=True, exist_ok=True)
    local._state_file.write_text(json.dumps({"topology_file": "seed", "cassandra_version": version}))
    seed = load_topology("seed")
    try:
        local._spawn(seed, seed.nodes[0], heap_mb=256)
    finally:
        cluster_module._CHILDREN.pop(0, None)
    return started[0], local


def test_a_5_0_node_lists_its_jars_first_and_its_classes_for_the_archive(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    command, local = spawn(monkeypatch, tmp_path, "5.0.9")
    conf = local.root / "node2" / "conf"
    assert command[command.index("-cp") + 1] == f"/j/a.jar:/j/b.jar:{conf}"
    listing = [option for option in command if option.startswith("-XX:DumpLoadedClassList=")]
    assert len(listing) == 1 and command.index(listing[0]) < command.index("-cp")
    assert local._archive_to_make is not None and str(local._archive_to_make.folder) == str(tmp_path / ".cache/cds")


def test_a_4_x_node_keeps_its_classpath_and_no_archive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    command, local = spawn(monkeypatch, tmp_path, "4.1.10")
    conf = local.root / "node2" / "conf"
    assert command[command.index("-cp") + 1] == f"{conf}:/j/a.jar:/j/b.jar"
    assert not [option for option in command if "Shared" in option or "DumpLoaded" in option]
    assert local._archive_to_make is None


def test_the_background_dump_is_kept_to_be_reaped_as_the_nodes_are(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Dropped while it runs, a Popen warns (ResourceWarning, an error under this suite's settings): the first
    cluster start of the run of ae79117 failed so, in the fixture that started it."""
    import subprocess

    running = subprocess.Popen(["sleep", "30"])
    monkeypatch.setattr(NodeClassArchive, "make_in_background", lambda self, log: running)
    local = cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)
    local._archive_to_make = NodeClassArchive("/usr/bin/java", ["a.jar"], tmp_path)
    try:
        local._make_class_archive()
        assert cluster_module._CHILDREN.get(running.pid) is running and local._archive_to_make is None
    finally:
        running.kill()
        running.wait()
        cluster_module._CHILDREN.pop(running.pid, None)
