"""A class data sharing (CDS) archive of the classes a local 5.0 node loads while it starts.

A node's JVM loads and verifies about 10,000 classes before it accepts CQL. From an archive of them (mapped, already
parsed and verified) a seed-cluster node accepted CQL after 8.8 s of CPU instead of 11.7 s (three starts each), and
`ringward cluster up`'s three nodes had used 11.4 s each instead of 14.0 s once all were up (2 cores, 2026-11-29);
the test suite starts dozens of nodes on a CPU-bound machine. The archive is made once per JDK and set
of jars: the first node started without one writes the list of classes it loads (`-XX:DumpLoadedClassList`), and
once it accepts CQL a background `java -Xshare:dump` (about 15 s of CPU) turns that list into the archive, which
every later node maps (`-XX:SharedArchiveFile`). A JVM that cannot use an archive (another JDK, a changed
classpath, a damaged file) says so on its stdout and starts without it, as before: the archive only saves time.

The archive holds classes from the jars only, so the node's classpath lists its jars first and its conf folder last
(the JVM archives no class from a folder, and accepts entries after the archived ones). The node reads its
configuration through explicit -D paths (cassandra.yaml, cassandra-rackdc.properties, logback.xml), and none of
Cassandra's jars holds a file of those names, so the order changes nothing it reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["NodeClassArchive"]

STALE_CLAIM_SECONDS = 600.0  # a claim older than this belongs to a run that died before its archive was made


class NodeClassArchive:
    """The archive for nodes that run `java` with `jars`, kept in `folder` (the project's .cache/cds)."""

    def __init__(self, java: str, jars: Sequence[str], folder: Path) -> None:
        self.java, self.jars, self.folder = java, list(jars), folder
        real = os.path.realpath(java)
        key = json.dumps([real, os.stat(real).st_mtime_ns if os.path.exists(real) else 0, self.jars])
        name = hashlib.sha256(key.encode()).hexdigest()[:24]
        self.archive = folder / f"{name}.jsa"
        self.class_list = folder / f"{name}.classlist"
        self._claim = folder / f"{name}.claim"

    def jvm_options(self) -> list[str]:
        """Map the archive when it exists; else write the class list when no other start is writing one (the
        caller then calls `make_in_background` once that node accepts CQL); else nothing."""
        if self.archive.is_file():
            return [f"-XX:SharedArchiveFile={self.archive}"]
        if self._take_claim():
            self.class_list.unlink(missing_ok=True)
            return [f"-XX:DumpLoadedClassList={self.class_list}"]
        return []

    def writes_class_list(self, options: Sequence[str]) -> bool:
        return any(option.startswith("-XX:DumpLoadedClassList=") for option in options)

    def make_in_background(self, log: Callable[[str], None]) -> subprocess.Popen[bytes] | None:
        """Start `java -Xshare:dump` from the class list a started node wrote; the archive appears (by rename) when
        it is complete. None when there is no list to make it from."""
        if self.archive.is_file() or not self.class_list.is_file():
            return None
        partial = self.archive.with_name(f"{self.archive.name}.{os.getpid()}.partial")
        dump = [self.java, "-Xshare:dump", f"-XX:SharedClassListFile={self.class_list}",
                f"-XX:SharedArchiveFile={partial}", "-cp", os.pathsep.join(self.jars)]  # fmt: skip
        log(f"making the nodes' class data archive in the background: {self.archive}")
        with open(self.folder / f"{self.archive.stem}.dump.log", "w") as output:
            # The rename only after a dump that succeeded: a node never maps a partial file.
            script = 'p=$0 a=$1; shift; "$@" && mv -f "$p" "$a"; rm -f "$p"'
            return subprocess.Popen(
                ["sh", "-c", script, str(partial), str(self.archive), *dump],
                stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    def _take_claim(self) -> bool:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(self._claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                stale = time.time() - self._claim.stat().st_mtime > STALE_CLAIM_SECONDS
            except FileNotFoundError:
                stale = True
            if not stale:
                return False
            self._claim.unlink(missing_ok=True)
            try:
                descriptor = os.open(self._claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
        os.close(descriptor)
        return True
