"""Real concurrency: a writer process appends while a maintainer process compacts,
merges and expires in a loop, and this process reads the latest snapshot over and
over, until enough happened (writer commits, a compaction and an expiry by the
maintainer, successful reads: counts, not a duration, so a slow machine only takes
longer); then the test stops both processes through a stop file.

No writer commit may fail, no read of a retained snapshot may hit a missing file,
and the final rows must be exactly the acknowledged ones. The reader relies on
``snapshot.time-retained`` (5 s): the snapshot that was the latest when a read
started cannot be expired before its successor is 5 s old.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers import SCHEMA
from tests.oracle import PaimonOracle, paimon_python

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import CorruptMetadataError, SnapshotNotFoundError
from snaplake.store.format.decoded_cache import metadata_cache

PROC = Path(__file__).with_name("maintenance_proc.py")
MAX_SECONDS = 300.0  # a safety cap only: the test stops the processes through the stop file
MIN_COMMITS = 150
MIN_READS = 20
TIME_RETAINED_S = 5.0
MODES = ("writer", "maintainer")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_writer_and_maintainer_processes(tmp_path):
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table(
        "db.t",
        schema=SCHEMA,
        partition_keys=["month"],
        options={
            "snapshot.num-retained.min": "10",
            "snapshot.time-retained": "5 s",
            "manifest.merge-min-count": "10",
            "compaction.min.file-num": "5",
            # a hot table: keep retrying quickly instead of backing off for seconds
            "commit.max-retries": "50",
            "commit.max-retry-wait": "200 ms",
        },
    )
    # Output goes to files: a pipe nobody drains fills up and blocks the maintainer,
    # which prints a line per iteration.
    logs = {mode: (tmp_path / f"{mode}.out", tmp_path / f"{mode}.err") for mode in MODES}
    stop = tmp_path / "stop"
    procs = {}
    for mode in MODES:
        out, err = logs[mode]
        with out.open("w") as stdout, err.open("w") as stderr:
            procs[mode] = subprocess.Popen(
                [sys.executable, str(PROC), mode, table.root, str(MAX_SECONDS), str(stop)],
                stdout=stdout,
                stderr=stderr,
            )
    reads = violations = 0
    excused: list[str] = []

    def enough() -> bool:
        if any(p.poll() is not None for p in procs.values()):
            return True  # one ended early (a failure, or the safety cap): checked below
        acks = logs["writer"][0].read_text().count("ACK ")
        runs = [line for line in logs["maintainer"][0].read_text().splitlines()
                if line.startswith("RUN")]  # fmt: skip
        return (
            acks >= MIN_COMMITS
            and reads >= MIN_READS
            and any("compact=None" not in r for r in runs)
            and any("expired=0" not in r for r in runs)
        )

    while not enough():
        snap = table.latest_snapshot()
        if snap is None:
            time.sleep(0.05)
            continue
        started = time.monotonic()
        metadata_cache.clear()
        try:
            data = table.to_arrow(snapshot_id=snap.id)
        except (FileNotFoundError, CorruptMetadataError, SnapshotNotFoundError) as exc:
            if time.monotonic() - started < TIME_RETAINED_S - 0.5:
                violations += 1
                pytest.fail(f"read of retained snapshot {snap.id} hit a missing file: {exc!r}")
            excused.append(repr(exc))  # the read outlived the retention: not a violation
            continue
        ids = data.column("id").to_pylist()
        assert len(ids) == len(set(ids)) == snap.total_record_count
        reads += 1
    stop.touch()
    for p in procs.values():
        p.wait(timeout=120)
    outputs = {mode: (out.read_text(), err.read_text()) for mode, (out, err) in logs.items()}
    for mode, p in procs.items():
        assert p.returncode == 0, f"{mode} failed:\n{outputs[mode][1]}"
    acks = [line.split() for line in outputs["writer"][0].splitlines() if line.startswith("ACK")]
    runs = [line for line in outputs["maintainer"][0].splitlines() if line.startswith("RUN")]
    assert acks
    assert runs
    assert reads
    assert not violations
    expected = {7 * int(k) + i for _, k, _, _ in acks for i in range(7)}
    metadata_cache.clear()
    final = table.to_arrow().column("id").to_pylist()
    assert len(final) == len(set(final))
    assert set(final) == expected
    # maintenance did real work while the writer ran
    assert any("compact=None" not in r for r in runs)
    assert any("expired=0" not in r for r in runs)
    if paimon_python().exists():
        got = PaimonOracle(tmp_path / "wh").read("db.t")
        assert set(got.column("id").to_pylist()) == expected
