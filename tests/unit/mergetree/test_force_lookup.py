"""``force-lookup = true``: a writer lifts level 0 with lookup at prepare_commit, no changelog.

Paimon's ``LookupStrategy`` makes such a table compact with lookup and its
writer wait for it (``lookup-wait``), as a ``lookup`` changelog table does,
without producing changelog. Checked per merge engine against the row model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import write_and_commit
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    engine_model,
    engine_options,
    make_rows,
    sorted_rows,
    to_table,
)

import snaplake
from snaplake.store.read.scan import FileStoreScan


def _levels(table: snaplake.Table) -> list[int]:
    scan = FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=table.latest_snapshot(),
    )  # fmt: skip
    return [f.level for s in scan.plan() for f in s.files]


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation"])
def test_force_lookup_writes_lift_level0_without_changelog(tmp_path: Path, engine: str) -> None:
    options = {**engine_options(engine), "bucket": "1", "force-lookup": "true"}
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS, options=options
    )
    model = TableModel(engine_model(engine))
    seen: set[int] = set()
    for ident, (start, seed) in enumerate([(0, 0), (5, 1), (0, 2), (3, 3), (8, 4)]):
        rows = make_rows(start, 12, seed=seed)
        if engine == "partial-update":  # some columns left null: the older record fills them
            rows = [{**r, "name": None} if i % 2 else r for i, r in enumerate(rows)]
        write_and_commit(table, to_table(rows), commit_identifier=ident)
        model.apply(rows)
        levels = _levels(table)
        assert levels and 0 not in levels  # lifted in the writer's commit
        seen.update(levels)
        assert sorted_rows(table.to_arrow()) == model.rows()
    snapshots = list(table.snapshot_manager.snapshots())
    assert all(s.changelog_manifest_list is None for s in snapshots)
    assert len(seen) > 1  # lookups found records in higher levels
