"""Damaged snapshot and schema files get typed errors that name the file (issue 18, 9c/9d)."""

from __future__ import annotations

import json

import pytest
from tests.helpers import create_table, rows, write_and_commit

import snaplake
from snaplake.errors import CorruptMetadataError, UnsupportedTypeError
from snaplake.store.format.snapshot import Snapshot
from snaplake.table import Table


@pytest.fixture
def table(tmp_path) -> Table:
    t = create_table(tmp_path / "wh", partition_keys=["month"])
    write_and_commit(t, rows(0, 30), commit_user="u", commit_identifier=1)
    return t


def _edit_json(path: str, edit) -> None:
    with open(path) as f:
        data = json.load(f)
    edit(data)
    with open(path, "w") as f:
        json.dump(data, f)


def _commit_more(table: Table, identifier: int) -> None:
    write_and_commit(table, rows(100, 3), commit_user="u", commit_identifier=identifier)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("totalRecordCount", "thirty"),
        ("deltaRecordCount", 1.5),
        ("baseManifestListSize", "12"),
        ("watermark", True),
    ],
)
def test_non_numeric_count_is_corrupt_metadata_naming_the_file(table, key, value):
    path = table.paths.snapshot_path(1)
    _edit_json(path, lambda d: d.__setitem__(key, value))
    with pytest.raises(CorruptMetadataError, match=key) as info:
        table.latest_snapshot()
    assert info.value.path == path
    with pytest.raises(CorruptMetadataError) as info:
        _commit_more(table, 2)  # the commit builds on snapshot 1's counts
    assert info.value.path == path


@pytest.mark.parametrize("value", ["x1", "", "1.0", " 7", "0x10"])
def test_malformed_txn_property_is_corrupt_metadata_naming_the_file(table, value):
    path = table.paths.snapshot_path(1)
    _edit_json(path, lambda d: d["properties"].__setitem__("snaplake.txn.u", value))
    with pytest.raises(CorruptMetadataError, match=r"snaplake\.txn\.u") as info:
        table.latest_snapshot()
    assert info.value.path == path
    with pytest.raises(CorruptMetadataError) as info:
        _commit_more(table, 2)  # the duplicate check reads the txn map first
    assert info.value.path == path


def test_well_formed_txn_properties_decode(table):
    snap = table.latest_snapshot()
    assert snap is not None
    assert snap.txn_map() == {"u": 1}
    again = Snapshot.from_bytes(snap.to_bytes(), path="snapshot-1")
    assert again.txn_map() == {"u": 1}
    assert again.total_record_count == 30


def test_unknown_type_in_a_schema_file_names_the_file_and_column(table, tmp_path):
    path = table.paths.schema_path(0)
    _edit_json(path, lambda d: d["fields"][2].__setitem__("type", "VARIANTX"))
    reopened = snaplake.FileSystemCatalog(str(tmp_path / "wh")).get_table("db.t")
    assert [s.id for s in reopened.snapshots()] == [1]  # metadata still reads
    for action in (
        reopened.to_arrow,
        lambda: reopened.new_write(commit_user="u").write_arrow(rows(0, 1)),
        lambda: reopened.schema().data_fields,
    ):
        with pytest.raises(UnsupportedTypeError, match="VARIANTX") as info:
            action()
        assert path in str(info.value)
        assert "column 'carrier'" in str(info.value)
