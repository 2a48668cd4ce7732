"""SIGKILL a compaction that writes deletion vectors at every storage operation.

The base table (deletion vectors, ``write-only``) holds two compacted commits
(files at the top level with vectors) and a third commit's level-0 files,
invisible to Paimon's readers. A child process compacts once and is killed
before or right after each of its counted storage operations (data files, the
vectors file, manifest, index manifest, manifest lists, snapshot, LATEST). On a
fresh copy per kill point, snaplake's reader (Java's rules: level 0 skipped,
vectors applied) sees the table as before the compaction or as after it, never
in between, and once published every later kill point sees it; pypaimon 2.1.0
agrees at the points around the publish; a new compaction brings every
unpublished copy to "after".
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.helpers import write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    dv_options,
    engine_model,
    make_rows,
    sorted_rows,
    to_table,
)

import snaplake

PROC = Path(__file__).with_name("dv_compact_crash_proc.py")

pytestmark = [pytest.mark.integration, requires_paimon]


def _child(root: Path, *kill: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROC), str(root / "db.db" / "t"), *kill],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _read(wh: Path) -> list[dict[str, object]]:
    got = PaimonOracle(wh).read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    return sorted_rows(got)


def _read_ours(wh: Path) -> list[dict[str, object]]:
    """snaplake's read (level 0 skipped, vectors applied: as Java's, tests/integration/
    test_dv_java_reads.py); pypaimon checks the points around the publish."""
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.t")
    return sorted_rows(table.to_arrow().select(PK_SCHEMA.names).cast(PK_SCHEMA))


def test_sigkill_at_every_operation_of_a_vector_writing_compaction(tmp_path: Path) -> None:
    base = tmp_path / "base"
    table = snaplake.FileSystemCatalog(str(base)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options=dv_options("deduplicate", **{"write-only": "true", "bucket": "1"}),
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    for first, seed in ((0, 0), (10, 1)):
        rows = make_rows(first, 30, seed=seed)
        write_and_commit(table, to_table(rows))
        model.apply(rows, None)
        table.compact()
    before = model.rows()
    rows = make_rows(5, 30, seed=2)
    deletes = make_rows(0, 4, seed=3)
    write_and_commit(table, to_table([*rows, *deletes]), row_kinds=["+U"] * 30 + ["-D"] * 4)
    model.apply(rows, None)
    model.apply(deletes, ["-D"] * 4)
    after = model.rows()
    assert before != after and _read(base) == before
    clean = tmp_path / "clean"
    shutil.copytree(base, clean)
    proc = _child(clean)
    assert proc.returncode == 0, proc.stderr
    assert _read(clean) == after
    ops = int(proc.stdout.split()[-1])
    assert ops >= 6  # data files, vectors file, manifest, index manifest, lists, snapshot
    points = [(n, phase) for n in range(1, ops + 1) for phase in ("before", "after")]
    copies = {}
    for n, phase in points:
        copies[n, phase] = tmp_path / f"kill-{n}-{phase}"
        shutil.copytree(base, copies[n, phase])
    with ThreadPoolExecutor(2) as pool:
        procs = dict(zip(points, pool.map(
            lambda p: _child(copies[p], str(p[0]), *(["after"] if p[1] == "after" else [])),
            points,
        ), strict=True))  # fmt: skip
    published = []
    for (n, phase), proc in procs.items():
        assert proc.returncode == -9, f"no crash at {n} {phase}: {proc.stderr}"
        got = _read_ours(copies[n, phase])
        assert got in (before, after), (n, phase)  # all or nothing
        published.append(got == after)
    assert not published[0] and published[-1]
    assert published == sorted(published)
    first = published.index(True)
    for point in (points[0], points[first - 1], points[first]):  # pypaimon agrees
        assert _read(copies[point]) == (after if point == points[first] else before), point
    for point, done in zip(points, published, strict=True):
        if not done:  # recovers: the next compaction lifts what is left
            snaplake.FileSystemCatalog(str(copies[point])).get_table("db.t").compact()
            assert _read_ours(copies[point]) == after, point
    assert _read(copies[points[0]]) == after
