"""Java Paimon 0.9 reads snaplake's deletion-vector primary-key tables exactly.

Java 0.9 skips level 0 of these tables and reads each other file with its
32-bit deletion vector applied (raw-convertible splits), so after every commit
(the writer's lookup compaction) and after a full compaction it must see the
row-at-a-time model: upserts, update pairs, deletes and retractions for
deduplicate, partial-update (``remove-record-on-delete``) and aggregation.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers import assert_java_rows, write_and_commit
from tests.integration.test_pk_java_reads import _history, _model, _options
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, to_table

import snaplake

pytestmark = [pytest.mark.integration, requires_java_paimon]

DV_ENGINES = ("deduplicate", "partial-update", "aggregation")


def _latest_id(table: Any) -> int:
    latest = table.latest_snapshot()
    assert latest is not None
    return int(latest.id)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, list[Any]]]:
    """Per engine: the table and ``(snapshot id, expected rows)`` after every step."""
    wh = tmp_path_factory.mktemp("pkdvjava")
    catalog = snaplake.FileSystemCatalog(str(wh))
    out = {}
    for engine in DV_ENGINES:
        table = catalog.create_table(
            f"db.{engine.replace('-', '_')}", schema=PK_SCHEMA, partition_keys=["month"],
            primary_keys=PK_KEYS, options={**_options(engine), "deletion-vectors.enabled": "true"},
        )  # fmt: skip
        model = _model(engine)
        steps = []
        for ident, (rows, kinds) in enumerate(_history(engine)):
            write_and_commit(table, to_table(rows), row_kinds=kinds, commit_identifier=ident)
            model.apply(rows, kinds)
            steps.append((_latest_id(table), model.rows()))
            if ident == 1:
                table.compact(full=True)
        table.compact(full=True)
        steps.append((_latest_id(table), model.rows()))
        out[engine] = (table, steps)
    return out


def test_java_reads_every_snapshot_of_deletion_vector_tables(
    tables: dict[str, tuple[Any, list[Any]]],
) -> None:
    requests = [(t.root, sid) for t, steps in tables.values() for sid, _ in steps]
    reads = iter(JavaPaimon().read_many(requests))
    for engine, (_table, steps) in tables.items():
        for sid, expected in steps:
            read = next(reads)
            assert_java_rows(read.rows, to_table(expected), context=f"{engine} @ {sid}")
            assert {k for s in read.splits for k in s.kinds} <= {"+I", "+U"}, engine
            assert read.misplaced_rows() == [], engine
