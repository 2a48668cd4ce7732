"""Paimon options snaplake honours (each with a test here or named in the option registry)
and the refusal of every option it does not."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, rows, sorted_ids
from tests.unit.compaction.conftest import append

from snaplake.catalog import FileSystemCatalog
from snaplake.compaction.expire import ExpireSnapshots
from snaplake.compaction.inline import run_inline_maintenance
from snaplake.errors import InvalidOptionError, UnsupportedTableError
from snaplake.options import Operation, OptionStatus
from snaplake.options.registry import iter_options, lookup_option, options_markdown
from snaplake.store.consumers import ConsumerManager
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.support import check_supported

README = Path(__file__).resolve().parents[3] / "README.md"


def _data_files(table) -> list[str]:
    return sorted(
        s.path.rsplit("/", 1)[-1]
        for s in table.file_io.list_files(table.root)
        if "/bucket-" in s.path
    )


def test_readme_lists_every_option_with_its_status():
    text = README.read_text()
    begin, end = "<!-- options:begin -->\n", "<!-- options:end -->"
    table = text[text.index(begin) + len(begin) : text.index(end)]
    assert table == options_markdown(), (
        "README option table is stale: paste snaplake.options.registry."
        "options_markdown() between the markers"
    )


def _status(key: str) -> OptionStatus | None:
    found = lookup_option(key)
    return None if found is None else found.status


def test_option_families_and_unknown_keys():
    assert _status("fields.price.aggregate-function") is OptionStatus.PRIMARY_KEY
    assert _status("file-index.bloom-filter.columns") is OptionStatus.LAYOUT
    assert _status("orc.compress") is OptionStatus.LAYOUT
    assert _status("orc.timestamp-ltz.legacy.type") is OptionStatus.HONOURED
    assert _status("sink.parallelism") is None  # Flink's, not a Paimon core option


# refused on every table (primary-key refusals: tests/unit/store/test_support.py)
_REFUSED = [
    o
    for o in iter_options()
    if o.status is not OptionStatus.PRIMARY_KEY
    and (o.status is OptionStatus.REFUSED or o.accepted != "any")
]


@pytest.mark.parametrize("option", _REFUSED, ids=lambda o: o.key)
def test_refused_values_are_refused_for_exactly_their_operations(option):
    assert not option.accepts("x-not-accepted")
    base = TableSchema.from_arrow(SCHEMA)
    schema = TableSchema.from_json_dict(
        {**base.to_json_dict(), "options": {**base.options, option.key: "x-not-accepted"}}
    )
    for op in Operation:
        if op in option.refused_for:
            with pytest.raises(UnsupportedTableError) as info:
                check_supported(schema, op)
            assert info.value.key == option.key
        elif op is not Operation.CREATE and option.key.startswith("deletion-vectors."):
            with pytest.raises(InvalidOptionError) as bad:  # decides which rows a read returns
                check_supported(schema, op)
            assert bad.value.key == option.key
        elif op is not Operation.CREATE and option.parse is not None:
            # honoured for this operation: a value that does not parse is a typed error
            error: InvalidOptionError | None = None
            try:
                check_supported(schema, op)
            except InvalidOptionError as exc:
                error = exc
            assert error is None or error.key == option.key
        elif op is not Operation.CREATE:
            check_supported(schema, op)


@pytest.mark.parametrize("option", _REFUSED, ids=lambda o: o.key)
def test_create_table_refuses_before_writing(tmp_path, option):
    if option.key == "bucket":
        pytest.skip("bucket values are checked by the schema (SchemaMismatchError)")
    catalog = FileSystemCatalog(str(tmp_path))
    # typed options (booleans, ...) fail to parse first: InvalidOptionError, also before writing
    with pytest.raises((UnsupportedTableError, InvalidOptionError)) as info:
        catalog.create_table("db.t", schema=SCHEMA, options={option.key: "x-not-accepted"})
    assert getattr(info.value, "key", None) == option.key
    assert not any(tmp_path.iterdir())


def _set_option(table, key: str, value: str) -> None:
    """What ALTER TABLE ... SET (key = value) leaves behind: the next schema file."""
    latest = table.schema()
    data = {**latest.to_json_dict(), "id": latest.id + 1}
    data["options"] = {**latest.options, key: value}
    Path(table.paths.schema_path(latest.id + 1)).write_text(json.dumps(data))


def test_a_read_selecting_option_refuses_reads_only(make_table):
    """scan.snapshot-id is honoured since issue 22 (tests/unit/changes/test_read_options.py)."""
    table = make_table()
    append(table, 0, 10)
    _set_option(table, "scan.watermark", "1")
    with pytest.raises(UnsupportedTableError, match=r"scan\.watermark"):
        table.to_arrow()
    append(table, 10, 10)  # writes and commits are unaffected
    table.compact()


def test_partition_expiration_is_honoured_by_writes_commits_and_maintenance(make_table):
    """Once refused, now honoured (issue 24): tests/unit/compaction/test_partition_expire.py."""
    table = make_table()
    append(table, 0, 10)
    _set_option(table, "partition.expiration-time", "7 d")
    _set_option(table, "partition.timestamp-pattern", "2024-$month-01")
    _set_option(table, "partition.timestamp-formatter", "yyyy-M-dd")
    append(table, 10, 10)
    table.expire_snapshots()
    result = table.expire_partitions()
    assert sorted(p.spec["month"] for p in result.partitions) == ["1", "2", "3"]
    assert table.to_arrow().num_rows == 0


# --- honoured --------------------------------------------------------------------------


def test_data_file_prefix_and_compression_suffix(make_table):
    table = make_table({"data-file.prefix": "part-", "file.suffix.include.compression": "true"})
    for i in range(3):
        append(table, i * 10, 10)
    names = _data_files(table)
    assert names and all(n.startswith("part-") and n.endswith(".zst.parquet") for n in names)
    table.compact()
    compacted = [n for n in _data_files(table) if n not in names]
    assert compacted and all(n.startswith("part-") for n in compacted)
    assert sorted_ids(table.to_arrow()) == list(range(30))
    plain = make_table({"file.compression": "none", "file.suffix.include.compression": "true"})
    append(plain, 0, 5)
    assert all(n.endswith(".parquet") and n.count(".") == 1 for n in _data_files(plain))
    snappy = make_table({"file.compression": "snappy", "file.suffix.include.compression": "true"})
    append(snappy, 0, 5)
    assert all(n.endswith(".snappy.parquet") for n in _data_files(snappy))


@pytest.mark.parametrize(
    ("mode", "carrier_max"),
    [
        ("full", "UA"),
        ("truncate(16)", "UA"),
        ("truncate(1)", "V"),
        ("counts", None),
        ("none", None),
    ],
)
def test_metadata_stats_mode(make_table, mode, carrier_max):
    table = make_table({"metadata.stats-mode": mode}, partitioned=False)
    append(table, 0, 40)
    (entry,) = table.new_scan().plan()[0].files
    schema = table.schema()
    maxs = decode_binary_row(entry.value_stats.max_values, schema.value_types)
    assert maxs[schema.field_names.index("carrier")] == carrier_max
    nulls = entry.value_stats.null_counts
    assert (nulls[0] is None) == (mode == "none")
    assert len(table.to_arrow(filter=("carrier", "=", "UA"))) == 10  # reads stay exact


def test_dynamic_partition_overwrite_false_overwrites_the_table(make_table):
    table = make_table({"dynamic-partition-overwrite": "false"})
    append(table, 0, 30)  # months 1..3
    write = table.new_write(commit_user="w")
    write.write_arrow(rows(100, 3).filter(pa.compute.equal(rows(100, 3).column("month"), 2)))
    table.new_commit(commit_user="w").commit(write.prepare_commit(), overwrite=True)
    assert sorted_ids(table.to_arrow()) == [100]
    dynamic = make_table()
    append(dynamic, 0, 30)
    write = dynamic.new_write(commit_user="w")
    write.write_arrow(rows(100, 3).filter(pa.compute.equal(rows(100, 3).column("month"), 2)))
    dynamic.new_commit(commit_user="w").commit(write.prepare_commit(), overwrite=True)
    assert len(dynamic.to_arrow()) == 21  # months 1 and 3 kept


def test_dynamic_overwrite_without_files_publishes_nothing(make_table):
    """Paimon's skipOverwrite: no new file, no touched partition, no OVERWRITE snapshot."""
    dynamic = make_table()
    append(dynamic, 0, 30)
    latest = dynamic.snapshot_manager.latest_snapshot_id()
    empty = dynamic.new_write(commit_user="w").prepare_commit()
    dynamic.new_commit(commit_user="w").commit(empty, overwrite=True)
    assert dynamic.snapshot_manager.latest_snapshot_id() == latest
    assert len(dynamic.to_arrow()) == 30
    static = make_table({"dynamic-partition-overwrite": "false"})
    append(static, 0, 30)
    static.new_commit(commit_user="w").commit(
        static.new_write(commit_user="w").prepare_commit(), overwrite=True
    )
    assert [s.commit_kind for s in static.snapshots()][-1] == CommitKind.OVERWRITE
    assert len(static.to_arrow()) == 0  # the whole-table overwrite still empties it


def test_write_only_turns_inline_maintenance_off(make_table):
    table = make_table({"snaplake.maintenance.inline": "true", "write-only": "true"})
    for i in range(6):
        append(table, i, 1)
    assert CommitKind.COMPACT not in [s.commit_kind for s in table.snapshots()]
    assert run_inline_maintenance(table).enabled  # the explicit call still works


def _expire(table):
    return ExpireSnapshots(table).execute()


def test_consumer_changelog_only_does_not_pin_snapshots(make_table):
    pinned = make_table()
    free = make_table({"consumer.changelog-only": "true"})
    for table in (pinned, free):
        for i in range(6):
            append(table, i, 1)
        ConsumerManager(table.file_io, table.paths).set_consumer("job", next_snapshot=2)
        _expire(table)
    assert pinned.snapshot_manager.earliest_snapshot_id() == 2
    assert free.snapshot_manager.earliest_snapshot_id() == 5


def test_idle_consumers_expire(make_table):
    table = make_table({"consumer.expiration-time": "1 h"})
    for i in range(6):
        append(table, i, 1)
    consumers = ConsumerManager(table.file_io, table.paths)
    consumers.set_consumer("idle", next_snapshot=1)
    consumers.set_consumer("busy", next_snapshot=3)
    old = time.time() - 7200
    os.utime(table.paths.consumer_path("idle"), (old, old))
    _expire(table)
    assert consumers.consumers() == {"busy": 3}
    assert table.snapshot_manager.earliest_snapshot_id() == 3


def test_zstd_level_reaches_the_data_files(make_table):
    sizes = {}
    for level in ("1", "19"):
        table = make_table({"file.compression.zstd-level": level}, partitioned=False)
        write = table.new_write(commit_user="w")
        write.write_arrow(rows(0, 20_000))
        table.new_commit(commit_user="w").commit(write.prepare_commit())
        sizes[level] = sum(f.file_size_bytes for s in table.new_scan().plan() for f in s.files)
    assert sizes["19"] < sizes["1"]  # the same rows, compressed harder


def test_partition_default_name_names_null_partitions(make_table):
    table = make_table({"partition.default-name": "NULLS"})
    write = table.new_write(commit_user="w")
    data = rows(0, 4)
    write.write_arrow(data.set_column(1, "month", pa.nulls(4, pa.int32())))
    table.new_commit(commit_user="w").commit(write.prepare_commit())
    (split,) = table.new_scan().plan()
    assert "/month=NULLS/bucket-0/" in split.paths[0]


def test_commit_retry_options_build_the_retry_policy():
    from snaplake.commit.retry import RetryPolicy
    from snaplake.options import CoreOptions

    policy = RetryPolicy.from_options(
        CoreOptions(
            {
                "commit.timeout": "5 s",
                "commit.max-retries": "3",
                "commit.min-retry-wait": "20 ms",
                "commit.max-retry-wait": "1 s",
            }
        )
    )
    assert (policy.timeout_s, policy.max_retries, policy.min_wait_s, policy.max_wait_s) == (
        5.0, 3, 0.02, 1.0
    )  # fmt: skip
