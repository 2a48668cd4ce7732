from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from tests.helpers import avro_records
from tests.strategies import make_entry

from snaplake.errors import (
    CorruptMetadataError,
    FileAlreadyExistsError,
    UnsupportedFormatVersionError,
)
from snaplake.store.format import avro, avro_codecs
from snaplake.store.format.data_file import EMPTY_BINARY_ROW, FileSource
from snaplake.store.format.manifest import (
    MANIFEST_ENTRY_AVRO_SCHEMA,
    FileKind,
    ManifestEntry,
    _entry_to_record,
    decode_manifest_file,
    encode_manifest_file,
    merge_entries,
    read_manifest_file,
    write_manifest_file,
)
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.store.io.memory_file_io import InMemoryFileIO

TABLE = Path(__file__).resolve().parents[2] / "fixtures" / "pypaimon_table"


def _snapshot(n: int) -> dict[str, Any]:
    snap: dict[str, Any] = json.loads((TABLE / "snapshot" / f"snapshot-{n}").read_text())
    return snap


def _live_entries(snapshot_id: int, *, columnar: bool | None = None) -> list[ManifestEntry]:
    fio = LocalFileIO()
    snap = _snapshot(snapshot_id)
    metas = []
    for key in ("baseManifestList", "deltaManifestList"):
        metas += read_manifest_list(fio, str(TABLE / "manifest" / snap[key]), use_cache=False)
    entries: list[ManifestEntry] = []
    for m in metas:
        data = (TABLE / "manifest" / m.file_name).read_bytes()
        assert len(data) == m.file_size_bytes
        entries += decode_manifest_file(data, path=m.file_name, columnar=columnar)
    return merge_entries(entries)


@pytest.mark.parametrize("columnar", [False, True])
def test_golden_pypaimon_table_decodes(columnar: bool) -> None:
    for snapshot_id in (1, 2, 3):
        live = _live_entries(snapshot_id, columnar=columnar)
        assert all(e.kind is FileKind.ADD for e in live)
        assert sum(e.file.row_count for e in live) == _snapshot(snapshot_id)["totalRecordCount"]
        for e in live:
            dt = e.partition[20:30].decode()  # inline-var string of the dt partition
            assert (TABLE / f"dt={dt}" / "bucket-0" / e.file.file_name).is_file()
            assert e.total_buckets == -1
            assert e.file.file_source is FileSource.APPEND
            assert e.file.min_key == EMPTY_BINARY_ROW
            assert e.file.value_stats.null_counts is not None
            assert len(e.file.value_stats.null_counts) == 5
            assert e.file.creation_time_ms is not None
            assert e.file.creation_time_ms > 1_600_000_000_000
    # Snapshot 3 overwrote dt=2024-01-01: its delta manifest holds a DELETE and an ADD.
    assert len(_live_entries(3)) == 3


def test_golden_delete_entry_matches_earlier_add() -> None:
    snap = _snapshot(3)
    fio = LocalFileIO()
    [delta] = read_manifest_list(fio, str(TABLE / "manifest" / snap["deltaManifestList"]))
    entries = read_manifest_file(fio, str(TABLE / "manifest" / delta.file_name))
    kinds = [e.kind for e in entries]
    assert kinds == [FileKind.DELETE, FileKind.ADD]
    assert delta.num_added_files == 1
    assert delta.num_deleted_files == 1


def test_golden_files_reencode_to_equal_records() -> None:
    for path in sorted((TABLE / "manifest").glob("manifest-*")):
        if path.name.startswith("manifest-list"):
            continue
        entries = decode_manifest_file(path.read_bytes(), path=str(path))
        ours = avro.parse_container(encode_manifest_file(entries), path="ours")
        theirs = avro.parse_container(path.read_bytes(), path="theirs")

        # The records encode to the very same bytes pypaimon wrote.
        def payload(c: avro.AvroContainer) -> bytes:
            return b"".join(avro_codecs.decompress_block(c.codec, b, path="p") for _, b in c.blocks)

        assert payload(ours) == payload(theirs)
        assert ours.record_count == theirs.record_count


def test_schema_header_equals_pypaimon_schema() -> None:
    path = next(p for p in (TABLE / "manifest").glob("manifest-*") if "list" not in p.name)
    theirs = avro.parse_container(path.read_bytes(), path="p").schema()
    assert theirs == MANIFEST_ENTRY_AVRO_SCHEMA


@pytest.mark.parametrize("compression", ["zstd", "none", "deflate", "bzip2", "xz", "ZSTD"])
def test_round_trip_every_codec(compression: str) -> None:
    entries = [make_entry(f"f{i}", bucket=i % 3, partition=bytes([i]) * 12) for i in range(50)]
    entries[3] = entries[3].as_delete()
    data = encode_manifest_file(entries, compression=compression)
    assert decode_manifest_file(data, path="m", columnar=False) == entries
    assert decode_manifest_file(data, path="m", columnar=True) == entries


def test_zstd_file_names_codec_like_pypaimon() -> None:
    data = encode_manifest_file([make_entry("a")])
    assert avro.parse_container(data, path="m").codec == "zstandard"


def test_null_codec_file_is_readable_by_plain_fastavro() -> None:
    e = make_entry("a", creation_time_ms=1_700_000_000_123)
    [rec] = avro_records(encode_manifest_file([e], compression="none"))
    assert rec["_VERSION"] == 2
    assert rec["_FILE"]["_FILE_NAME"] == "a"
    # fastavro applies the timestamp-millis logical type; the instant is the stored long
    assert int(rec["_FILE"]["_CREATION_TIME"].timestamp() * 1000) == 1_700_000_000_123


def test_write_is_create_only_and_returns_size() -> None:
    fio = InMemoryFileIO()
    entries = [make_entry("a"), make_entry("b")]
    n = write_manifest_file(fio, "memory://t/manifest/manifest-x-0", entries)
    assert n == len(fio.read_bytes("memory://t/manifest/manifest-x-0"))
    with pytest.raises(FileAlreadyExistsError):
        write_manifest_file(fio, "memory://t/manifest/manifest-x-0", entries)
    assert read_manifest_file(fio, "memory://t/manifest/manifest-x-0", use_cache=False) == entries


def test_read_uses_cache_and_can_bypass_it() -> None:
    fio = InMemoryFileIO()
    path = "memory://t/manifest/manifest-cache-0"
    fio.write_if_absent(path, encode_manifest_file([make_entry("a")]))
    first = read_manifest_file(fio, path)
    fio.delete(path)
    assert read_manifest_file(fio, path) == first  # immutable file: served from cache
    with pytest.raises(FileNotFoundError):
        read_manifest_file(fio, path, use_cache=False)
    first.clear()  # callers get their own list
    assert len(read_manifest_file(fio, path)) == 1


def test_empty_manifest_round_trips() -> None:
    assert decode_manifest_file(encode_manifest_file([]), path="m") == []


@pytest.mark.parametrize("cut", [0, 3, 10, 200, -40, -17, -1])
def test_truncated_file_raises_corrupt_with_path(cut: int) -> None:
    data = encode_manifest_file([make_entry(f"f{i}") for i in range(20)])
    fio = InMemoryFileIO()
    fio.write_bytes("memory://t/m", data[:cut])
    with pytest.raises(CorruptMetadataError) as info:
        read_manifest_file(fio, "memory://t/m", use_cache=False)
    assert info.value.path == "memory://t/m"
    assert "memory://t/m" in str(info.value)


def test_garbage_inside_block_raises_corrupt() -> None:
    data = bytearray(
        encode_manifest_file([make_entry(f"f{i}") for i in range(20)], compression="none")
    )
    container = avro.parse_container(bytes(data), path="m")
    start = len(data) - 16 - len(container.blocks[0][1])
    data[start : start + 40] = b"\xff" * 40
    for columnar in (False, True):
        with pytest.raises(CorruptMetadataError) as info:
            decode_manifest_file(bytes(data), path="m", columnar=columnar)
        assert info.value.path == "m"


def test_corrupt_zstd_block_raises_corrupt() -> None:
    data = bytearray(encode_manifest_file([make_entry(f"f{i}") for i in range(20)]))
    data[-30] ^= 0xFF
    data[-25] ^= 0xFF
    with pytest.raises(CorruptMetadataError):
        decode_manifest_file(bytes(data), path="m")


def _write_with_version(version: int) -> bytes:
    rec = _entry_to_record(make_entry("a"))
    rec["_VERSION"] = version
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(MANIFEST_ENTRY_AVRO_SCHEMA), [rec], codec="deflate")
    return buf.getvalue()


@pytest.mark.parametrize("columnar", [False, True])
@pytest.mark.parametrize("version", [3, 1])
def test_other_version_raises_unsupported(version: int, columnar: bool) -> None:
    with pytest.raises(UnsupportedFormatVersionError) as info:
        decode_manifest_file(_write_with_version(version), path="m", columnar=columnar)
    assert info.value.version == version
    assert info.value.path == "m"


def _java_style_schema() -> dict[str, Any]:
    # Java names records org.apache.paimon.avro.generated.record*, and a Paimon 1.0
    # writer has no _FIRST_ROW_ID/_WRITE_COLS/_WRITE_COLS_SEQUENCES yet.
    def stats(name: str) -> dict[str, Any]:
        s = {
            "type": "record",
            "name": name,
            "fields": [
                {"name": "_MIN_VALUES", "type": "bytes"},
                {"name": "_MAX_VALUES", "type": "bytes"},
                {
                    "name": "_NULL_COUNTS",
                    "type": ["null", {"type": "array", "items": ["null", "long"]}],
                    "default": None,
                },
            ],
        }
        return s

    file_fields = [
        f
        for f in MANIFEST_ENTRY_AVRO_SCHEMA["fields"][5]["type"]["fields"]
        if f["name"] not in ("_FIRST_ROW_ID", "_WRITE_COLS", "_WRITE_COLS_SEQUENCES")
    ]
    file_fields = [
        {**f, "type": stats("record__KEY_STATS")}
        if f["name"] == "_KEY_STATS"
        else {**f, "type": stats("record__VALUE_STATS")}
        if f["name"] == "_VALUE_STATS"
        else f
        for f in file_fields
    ]
    return {
        "type": "record",
        "name": "record",
        "namespace": "org.apache.paimon.avro.generated",
        "fields": [
            *MANIFEST_ENTRY_AVRO_SCHEMA["fields"][:5],
            {
                "name": "_FILE",
                "type": {"type": "record", "name": "record__FILE", "fields": file_fields},
            },
        ],
    }


@pytest.mark.parametrize("columnar", [False, True])
def test_java_style_older_schema_decodes_with_defaults(columnar: bool) -> None:
    e = make_entry("a", first_row_id=None, write_cols=None)
    rec = _entry_to_record(e)
    for k in ("_FIRST_ROW_ID", "_WRITE_COLS", "_WRITE_COLS_SEQUENCES"):
        del rec["_FILE"][k]
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(_java_style_schema()), [rec] * 3, codec="deflate")
    assert decode_manifest_file(buf.getvalue(), path="m", columnar=columnar) == [e] * 3


def test_missing_required_field_raises_corrupt() -> None:
    schema = {"type": "record", "name": "X", "fields": [{"name": "_VERSION", "type": "int"}]}
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [{"_VERSION": 2}], codec="null")
    for columnar in (False, True):
        with pytest.raises(CorruptMetadataError):
            decode_manifest_file(buf.getvalue(), path="m", columnar=columnar)


# ----------------------------------------------------------------- merge_entries


def test_merge_delete_cancels_earlier_add() -> None:
    a, b = make_entry("a"), make_entry("b")
    assert merge_entries([a, b, a.as_delete()]) == [b]


def test_merge_keeps_unmatched_delete_for_partial_sequences() -> None:
    a, b = make_entry("a"), make_entry("b")
    partial = merge_entries([b, a.as_delete()])
    assert partial == [b, a.as_delete()]
    assert merge_entries([a, *partial]) == [b]


def test_merge_identity_includes_partition_bucket_level_and_extras() -> None:
    a = make_entry("a")
    others = [
        make_entry("a", partition=b"\x01" * 12),
        make_entry("a", bucket=1),
        make_entry("a", level=1),
        make_entry("a", extra_files=("a.idx",)),
        make_entry("a", embedded_index=b"i"),
        make_entry("a", external_path="s3://b/a"),
    ]
    merged = merge_entries([a, *(o.as_delete() for o in others)])
    assert merged[0] == a
    assert len(merged) == 7


def test_merge_readd_after_delete_goes_last() -> None:
    a, b = make_entry("a"), make_entry("b")
    assert merge_entries([a, b, a.as_delete(), a]) == [b, a]


def test_merge_double_add_is_corrupt() -> None:
    with pytest.raises(CorruptMetadataError, match="already present"):
        merge_entries([make_entry("a"), make_entry("a", row_count=5)])


def test_merge_ignores_non_identity_fields_on_delete() -> None:
    a = make_entry("a", row_count=10)
    assert merge_entries([a, make_entry("a", FileKind.DELETE, row_count=99)]) == []
