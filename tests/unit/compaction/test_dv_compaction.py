"""Lookup compaction of deletion-vector tables: bad input is refused before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.helpers import write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

import snaplake
from snaplake.errors import CorruptMetadataError, InvalidOptionError, UnsupportedTableError
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX
from snaplake.store.read.index_scan import read_index_entries


def _files(root: Path) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)


def test_a_corrupt_vectors_file_stops_compaction_naming_it(tmp_path: Path) -> None:
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "1", "deletion-vectors.enabled": "true", "write-only": "true"},
    )  # fmt: skip
    write_and_commit(table, to_table(make_rows(0, 30)))
    table.compact(full=True)
    write_and_commit(table, to_table(make_rows(0, 10, seed=1)))
    table.compact()
    entries = read_index_entries(table, table.latest_snapshot(), index_type=DELETION_VECTORS_INDEX)
    assert entries
    path = Path(table.root) / "index" / entries[0].index_file.file_name
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the CRC of the last vector
    path.write_bytes(bytes(data))
    write_and_commit(table, to_table(make_rows(0, 5, seed=2)))  # write-only: level 0
    before = _files(Path(table.root))
    with pytest.raises(CorruptMetadataError, match=entries[0].index_file.file_name):
        table.compact()
    assert _files(Path(table.root)) == before, "nothing written or deleted"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"merge-engine": "first-row"}, "first-row"),
        ({"changelog-producer": "full-compaction"}, "changelog-producer"),
        ({"deletion-vectors.bitmap64": "maybe"}, "bitmap64"),
    ],
)
def test_paimon_refusals_are_typed_and_write_nothing(
    tmp_path: Path, options: dict[str, str], match: str
) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    with pytest.raises(InvalidOptionError, match=match):
        catalog.create_table(
            "db.t", schema=PK_SCHEMA, primary_keys=PK_KEYS,
            options={"bucket": "1", "deletion-vectors.enabled": "true", **options},
        )  # fmt: skip
    assert not any(tmp_path.iterdir())


def test_postpone_buckets_with_deletion_vectors_are_refused(tmp_path: Path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    with pytest.raises(UnsupportedTableError, match="postpone") as info:
        catalog.create_table(
            "db.t", schema=PK_SCHEMA, primary_keys=PK_KEYS,
            options={"bucket": "-2", "deletion-vectors.enabled": "true"},
        )  # fmt: skip
    assert info.value.operation == "create"
    assert not any(tmp_path.iterdir())
