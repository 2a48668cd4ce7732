from __future__ import annotations

import dataclasses

import orjson
import pytest
from tests.strategies import make_file

from snaplake.store.format.data_file import (
    DATA_FILE_META_AVRO_SCHEMA,
    EMPTY_BINARY_ROW,
    EMPTY_STATS,
    DataFileMeta,
    FileSource,
    SimpleStats,
    _fast_data_file_meta,
    _fast_simple_stats,
    data_file_meta_from_json_dict,
    data_file_meta_to_json_dict,
)


def test_empty_row_is_twelve_zero_bytes_like_pypaimon() -> None:
    # GenericRowSerializer.to_bytes(GenericRow([], [])) in pypaimon 2.1.0 gives these
    # 12 bytes: arity 0 (4 bytes, big-endian) plus one 8-byte header/null-bit word.
    assert bytes(12) == EMPTY_BINARY_ROW
    assert (
        SimpleStats(min_values=EMPTY_BINARY_ROW, max_values=EMPTY_BINARY_ROW, null_counts=())
        == EMPTY_STATS
    )


def test_field_order_matches_avro_schema() -> None:
    # Attribute i of DataFileMeta is Avro field i of the _FILE record.
    attrs = [f.name for f in dataclasses.fields(DataFileMeta)]
    avro = [f["name"] for f in DATA_FILE_META_AVRO_SCHEMA["fields"]]
    assert len(attrs) == len(avro) == 21
    assert avro[0] == "_FILE_NAME"
    assert avro[-1] == "_WRITE_COLS_SEQUENCES"
    assert attrs[12] == "creation_time_ms"
    assert avro[12] == "_CREATION_TIME"


def test_identifier_excludes_partition_and_bucket() -> None:
    f = make_file("a.parquet", level=3, extra_files=("a.index",), external_path="s3://x/a")
    assert f.identifier() == (3, "a.parquet", ("a.index",), None, "s3://x/a")


def test_frozen_and_hashable() -> None:
    f = make_file("a.parquet")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.level = 1  # type: ignore[misc]
    assert hash(f) == hash(make_file("a.parquet"))


@pytest.mark.parametrize(("field", "value"), [("row_count", -1), ("file_size_bytes", -5)])
def test_post_init_rejects_negative_counts(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        make_file("a.parquet", **{field: value})


def test_fast_constructors_build_equal_frozen_objects() -> None:
    ref = make_file(
        "a.parquet",
        value_stats=SimpleStats(min_values=b"1", max_values=b"2", null_counts=(0, None)),
    )
    args = [getattr(ref, f.name) for f in dataclasses.fields(DataFileMeta)]
    args[6] = _fast_simple_stats(b"1", b"2", (0, None))
    fast = _fast_data_file_meta(*args)
    assert type(fast) is DataFileMeta
    assert fast == ref
    assert hash(fast) == hash(ref)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.file_name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.value_stats.min_values = b""  # type: ignore[misc]


def test_json_round_trip_through_orjson_bytes() -> None:
    f = make_file(
        "a.parquet",
        min_key=b"\x00\xff\x80",
        value_stats=SimpleStats(
            min_values=b"\x01" * 30, max_values=b"\x02", null_counts=(1, None, 3)
        ),
        embedded_index=b"\x00idx",
        file_source=FileSource.COMPACT,
        value_stats_cols=("a", "b"),
        write_cols=("a",),
        write_cols_sequences=(7,),
        first_row_id=42,
        creation_time_ms=None,
    )
    d = data_file_meta_to_json_dict(f)
    assert d["minKey"] == "AP+A"  # base64
    back = data_file_meta_from_json_dict(orjson.loads(orjson.dumps(d)))
    assert back == f
    assert type(back.file_source) is FileSource
    assert DataFileMeta.from_json_dict(f.to_json_dict()) == f


def test_json_ignores_unknown_keys_and_defaults_absent_optionals() -> None:
    f = make_file("a.parquet", creation_time_ms=None, delete_row_count=None, file_source=None)
    d = f.to_json_dict()
    for key in (
        "creationTime",
        "deleteRowCount",
        "embeddedIndex",
        "fileSource",
        "valueStatsCols",
        "externalPath",
        "firstRowId",
        "writeCols",
        "writeColsSequences",
    ):
        del d[key]
    d["someFutureKey"] = 1
    assert data_file_meta_from_json_dict(d) == f


def test_json_rejects_bad_base64() -> None:
    d = make_file("a.parquet").to_json_dict()
    d["minKey"] = "not base64!"
    with pytest.raises(ValueError, match=r"base64|character|padding|Only"):
        data_file_meta_from_json_dict(d)


def test_simple_stats_json_round_trip() -> None:
    s = SimpleStats(min_values=b"\x00", max_values=b"", null_counts=None)
    assert SimpleStats.from_json_dict(s.to_json_dict()) == s


def test_helpers() -> None:
    f = make_file("a.parquet", row_count=10, delete_row_count=3)
    assert f.with_sequence_range(5, 9).max_sequence_number == 9
    stripped = make_file(
        "b", value_stats=SimpleStats(min_values=b"x", max_values=b"y", null_counts=(0,))
    )
    assert stripped.without_value_stats().value_stats == EMPTY_STATS
    assert stripped.without_value_stats().value_stats_cols == ()
