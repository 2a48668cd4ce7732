"""``partial-update.remove-record-on-delete``: a minor compaction folds a -D into the next version.

Issue 18 item 4. The reset a ``-D`` makes lasts only while the ``-D`` and the
versions before it are merged together. A minor compaction that merges the
``-D`` run with a later ``+I`` run, but not the level holding the older value,
folds them into one ``+I`` whose nulls no longer say "reset": the next merge
with the older level fills them from it. Java Paimon does the same
(``PartialUpdateMergeFunction``: a ``-D`` resets the row to the delete's values,
a later ``+I`` makes the result ``+I``; ``MergeTreeCompactRewriter`` merges the
unit's runs alone and keeps deletes below the highest level), so snaplake keeps
Paimon's result and documents it (``docs/primary-key-tables.md`` §5, the
option's row in the README). Java 0.9 itself fails on such a merge (an NPE,
``tests/integration/test_pk_java_reads.py``); Java 0.9 reading the compacted
files agrees with snaplake there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from tests.helpers import write_and_commit

import snaplake

SCHEMA = pa.schema(
    [pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string()), ("n", pa.int64())]
)
OPTIONS = {
    "bucket": "1",
    "merge-engine": "partial-update",
    "partial-update.remove-record-on-delete": "true",
    "num-sorted-run.compaction-trigger": "2",
}


def _write(
    table: Any, rows: Sequence[tuple[int, str | None, int | None]], kind: str = "+I"
) -> None:
    data = pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.string()),
            "n": pa.array([r[2] for r in rows], pa.int64()),
        },
        schema=SCHEMA,
    )
    write_and_commit(table, data, row_kinds=[kind] * len(rows))


def build_deleted_and_reinserted(warehouse: Path) -> Any:
    """Key 0 = ('old', 1) on the top level (with 299 other keys, so size amplification
    does not pick it), then a ``-D`` of key 0 and a re-insert ``(None, 3)``, each its
    own level-0 run."""
    table = snaplake.FileSystemCatalog(str(warehouse)).create_table(
        "db.t", schema=SCHEMA, primary_keys=["k"], options=OPTIONS
    )
    _write(table, [(0, "old", 1)] + [(i, f"value-{i:020d}", i) for i in range(1, 300)])
    table.compact(full=True)
    _write(table, [(0, None, None)], "-D")
    _write(table, [(0, None, 3)])
    return table


def _key0(table: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.to_arrow(filter=[("k", "=", 0)]).to_pylist()
    return rows


def _levels(table: Any) -> list[tuple[int, int]]:
    return sorted((f.level, f.row_count) for s in table.new_scan().plan() for f in s.files)


def test_level0_compaction_loses_the_reset_as_in_paimon(tmp_path: Path) -> None:
    """Before compaction the -D resets v; after the level-0 runs merge alone, 'old' shows."""
    table = build_deleted_and_reinserted(tmp_path)
    assert _levels(table) == [(0, 1), (0, 1), (2, 300)]
    assert _key0(table) == [{"k": 0, "v": None, "n": 3}]

    result = table.compact()  # universal compaction: size ratio picks the two level-0 runs
    assert result.files_before == 2
    assert _levels(table) == [(1, 1), (2, 300)]  # the -D is folded into a level-1 +I
    assert _key0(table) == [{"k": 0, "v": "old", "n": 3}]

    table.compact(full=True)  # the full compaction persists it
    assert _key0(table) == [{"k": 0, "v": "old", "n": 3}]


def test_full_compaction_between_delete_and_reinsert_keeps_the_reset(tmp_path: Path) -> None:
    """The documented way out: a full compaction after the delete drops key 0 everywhere."""
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=SCHEMA, primary_keys=["k"], options=OPTIONS
    )
    _write(table, [(0, "old", 1)] + [(i, f"value-{i:020d}", i) for i in range(1, 300)])
    table.compact(full=True)
    _write(table, [(0, None, None)], "-D")
    table.compact(full=True)
    _write(table, [(0, None, 3)])
    _write(table, [(1, None, 7)])
    assert _key0(table) == [{"k": 0, "v": None, "n": 3}]
    assert table.compact().files_before == 2
    assert _key0(table) == [{"k": 0, "v": None, "n": 3}]
    table.compact(full=True)
    assert _key0(table) == [{"k": 0, "v": None, "n": 3}]
