from __future__ import annotations

import pytest
from tests.unit.compaction.conftest import append

from snaplake.errors import CorruptMetadataError
from snaplake.store.consumers import ConsumerManager


def test_set_read_and_delete_consumers(make_table):
    table = make_table()
    assert table.consumers() == {}
    table.set_consumer("reader-a", next_snapshot=4)
    table.set_consumer("reader_b", next_snapshot=2)
    table.set_consumer("reader-a", next_snapshot=5)
    assert table.consumers() == {"reader-a": 5, "reader_b": 2}
    # Paimon's file layout and JSON key
    assert table.file_io.read_bytes(table.paths.consumer_path("reader_b")) == b'{"nextSnapshot":2}'
    manager = ConsumerManager(table.file_io, table.paths)
    assert manager.min_next_snapshot() == 2
    manager.delete_consumer("reader_b")
    assert manager.min_next_snapshot() == 5


def test_invalid_consumer_arguments(make_table):
    table = make_table()
    with pytest.raises(ValueError, match="invalid consumer id"):
        table.set_consumer("a/b", next_snapshot=1)
    with pytest.raises(ValueError, match="next_snapshot"):
        table.set_consumer("a", next_snapshot=0)


def test_corrupt_consumer_file_is_named(make_table):
    table = make_table()
    path = table.paths.consumer_path("x")
    table.file_io.write_bytes(path, b"{oops", overwrite=True)
    with pytest.raises(CorruptMetadataError) as info:
        table.consumers()
    assert info.value.path == path


def test_consumer_pins_snapshots_against_expiry(make_table):
    table = make_table()
    for i in range(8):
        append(table, i * 5, 5)
    table.set_consumer("slow", next_snapshot=3)
    result = table.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2)
    assert next(s.id for s in table.snapshots()) == 3
