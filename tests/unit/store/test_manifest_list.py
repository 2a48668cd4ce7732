from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import fastavro
import pytest

from snaplake.errors import (
    CorruptMetadataError,
    FileAlreadyExistsError,
    UnsupportedFormatVersionError,
)
from snaplake.store.format import avro, avro_codecs
from snaplake.store.format.data_file import EMPTY_STATS, SimpleStats
from snaplake.store.format.manifest_list import (
    MANIFEST_FILE_META_AVRO_SCHEMA,
    ManifestFileMeta,
    _meta_to_record,
    decode_manifest_list,
    encode_manifest_list,
    read_manifest_list,
    write_manifest_list,
)
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.store.io.memory_file_io import InMemoryFileIO

TABLE = Path(__file__).resolve().parents[2] / "fixtures" / "pypaimon_table"


def meta(name: str, **kw: object) -> ManifestFileMeta:
    fields: dict[str, object] = {
        "file_name": name,
        "file_size_bytes": 2000,
        "num_added_files": 3,
        "num_deleted_files": 1,
        "partition_stats": SimpleStats(
            min_values=b"\x01" * 24, max_values=b"\x02" * 24, null_counts=(0,)
        ),
        "schema_id": 0,
    }
    fields.update(kw)
    return ManifestFileMeta(**fields)  # type: ignore[arg-type]


def test_golden_lists_decode() -> None:
    fio = LocalFileIO()
    for n in (1, 2, 3):
        snap = json.loads((TABLE / "snapshot" / f"snapshot-{n}").read_text())
        for key, size_key in (
            ("baseManifestList", "baseManifestListSize"),
            ("deltaManifestList", "deltaManifestListSize"),
        ):
            path = TABLE / "manifest" / snap[key]
            assert path.stat().st_size == snap[size_key]
            metas = read_manifest_list(fio, str(path), use_cache=False)
            for m in metas:
                assert (TABLE / "manifest" / m.file_name).stat().st_size == m.file_size_bytes
                assert m.min_bucket == m.max_bucket == 0
                assert m.min_level == m.max_level == 0
                assert m.partition_stats.null_counts == (0,)
                assert m.partition_stats.min_values[:4] == b"\x00\x00\x00\x01"  # arity 1
    snap3 = json.loads((TABLE / "snapshot" / "snapshot-3").read_text())
    base = read_manifest_list(fio, str(TABLE / "manifest" / snap3["baseManifestList"]))
    assert [m.num_added_files for m in base] == [2, 1]


def test_golden_lists_reencode_to_identical_payload() -> None:
    for path in sorted((TABLE / "manifest").glob("manifest-list-*")):
        theirs = avro.parse_container(path.read_bytes(), path="t")
        assert theirs.schema() == MANIFEST_FILE_META_AVRO_SCHEMA
        metas = decode_manifest_list(path.read_bytes(), path=str(path))
        ours = avro.parse_container(encode_manifest_list(metas), path="o")

        def payload(c: avro.AvroContainer) -> bytes:
            return b"".join(avro_codecs.decompress_block(c.codec, b, path="p") for _, b in c.blocks)

        assert payload(ours) == payload(theirs)


@pytest.mark.parametrize("compression", ["zstd", "none", "deflate", "bzip2", "xz"])
def test_round_trip(compression: str) -> None:
    metas = [
        meta("m0"),
        meta(
            "m1",
            min_bucket=0,
            max_bucket=7,
            min_level=0,
            max_level=5,
            min_row_id=0,
            max_row_id=99,
            total_buckets=8,
            extra_files=("x",),
        ),
        meta("m2", partition_stats=EMPTY_STATS),
        meta("m3", partition_stats=SimpleStats(min_values=b"", max_values=b"", null_counts=None)),
    ]
    assert (
        decode_manifest_list(encode_manifest_list(metas, compression=compression), path="l")
        == metas
    )


def test_field_order_matches_avro_schema() -> None:
    attrs = [f.name for f in dataclasses.fields(ManifestFileMeta)]
    avro = [f["name"] for f in MANIFEST_FILE_META_AVRO_SCHEMA["fields"]][1:]
    assert len(attrs) == len(avro) == 14


def test_write_create_only_and_size() -> None:
    fio = InMemoryFileIO()
    n = write_manifest_list(fio, "memory://t/manifest/manifest-list-a-0", [meta("m")])
    assert n == len(fio.read_bytes("memory://t/manifest/manifest-list-a-0"))
    with pytest.raises(FileAlreadyExistsError):
        write_manifest_list(fio, "memory://t/manifest/manifest-list-a-0", [])
    assert read_manifest_list(fio, "memory://t/manifest/manifest-list-a-0", use_cache=False) == [
        meta("m")
    ]


def test_negative_counts_rejected() -> None:
    with pytest.raises(ValueError, match="counts"):
        meta("m", num_added_files=-1)
    assert meta("m").num_entries == 4


@pytest.mark.parametrize("cut", [0, 2, 30, -20, -1])
def test_truncated_raises_corrupt_with_path(cut: int) -> None:
    fio = InMemoryFileIO()
    fio.write_bytes("memory://t/l", encode_manifest_list([meta(f"m{i}") for i in range(5)])[:cut])
    with pytest.raises(CorruptMetadataError) as info:
        read_manifest_list(fio, "memory://t/l", use_cache=False)
    assert info.value.path == "memory://t/l"


def test_newer_version_raises_unsupported() -> None:
    rec = _meta_to_record(meta("m"))
    rec["_VERSION"] = 3
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(MANIFEST_FILE_META_AVRO_SCHEMA), [rec])
    with pytest.raises(UnsupportedFormatVersionError) as info:
        decode_manifest_list(buf.getvalue(), path="l")
    assert info.value.version == 3


def test_java_12_field_schema_decodes() -> None:
    # Java 1.x writes no _TOTAL_BUCKETS/_EXTRA_FILES and uses generated record names.
    fields = [
        f
        for f in MANIFEST_FILE_META_AVRO_SCHEMA["fields"]
        if f["name"] not in ("_TOTAL_BUCKETS", "_EXTRA_FILES")
    ]
    fields = [
        {**f, "type": {**f["type"], "name": "record__PARTITION_STATS"}}
        if f["name"] == "_PARTITION_STATS"
        else f
        for f in fields
    ]
    schema = {
        "type": "record",
        "name": "record",
        "namespace": "org.apache.paimon.avro.generated",
        "fields": fields,
    }
    m = meta("m", min_bucket=1, max_bucket=2)
    rec = _meta_to_record(m)
    del rec["_TOTAL_BUCKETS"], rec["_EXTRA_FILES"]
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [rec], codec="deflate")
    assert decode_manifest_list(buf.getvalue(), path="l") == [m]
