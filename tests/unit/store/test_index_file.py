"""Index manifests and HASH index files: codecs, the combine rule, Java 0.9 and pypaimon files.

The Java fixture (``tests/fixtures/java09_dynamic_index``) is the index part of a
dynamic-bucket table Java Paimon 0.9 wrote (``tests/oracle/java/JavaDynamicIndexWriter.java
create``):
rows ``(dt, id)`` = ``("a", 0..3)``, ``("b", 4..5)``, id ``i`` in bucket ``i % 2``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snaplake.commit.message import CommitMessage, CompactIncrement, DataIncrement
from snaplake.errors import CorruptMetadataError, UnsupportedFormatVersionError
from snaplake.store.format.binary_row import encode_binary_row
from snaplake.store.format.bucket import hash_binary_rows
from snaplake.store.format.hash_index import read_hash_index, write_hash_index
from snaplake.store.format.index_file import (
    DELETION_VECTORS_INDEX,
    HASH_INDEX,
    INDEX_MANIFEST_AVRO_SCHEMA,
    DeletionVectorMeta,
    IndexFileMeta,
    IndexManifestEntry,
    combine_index_entries,
    decode_index_manifest,
    encode_index_manifest,
    read_index_manifest,
    write_index_manifest,
)
from snaplake.store.format.manifest import FileKind
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.types import parse_type
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.store.io.memory_file_io import InMemoryFileIO

JAVA_TABLE = Path(__file__).resolve().parents[2] / "fixtures" / "java09_dynamic_index"
ID_TYPES = [parse_type("BIGINT NOT NULL")]

_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_ranges = st.builds(
    DeletionVectorMeta,
    _names,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)
_metas = st.builds(
    IndexFileMeta,
    st.sampled_from([HASH_INDEX, DELETION_VECTORS_INDEX, "OTHER"]),
    _names,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.none() | st.lists(_ranges, max_size=4).map(tuple),
    st.none() | _names,
)
_entries = st.builds(
    IndexManifestEntry,
    st.sampled_from(list(FileKind)),
    st.binary(max_size=40),
    st.integers(-(2**31), 2**31 - 1),
    _metas,
)


def _id_hashes(ids: list[int]) -> list[int]:
    data = pa.table({"id": pa.array(ids, pa.int64())})
    return sorted(int(h) for h in hash_binary_rows(data, ["id"], ID_TYPES))


def _partition(dt: str) -> bytes:
    return encode_binary_row([dt], [parse_type("STRING NOT NULL")])


# --------------------------------------------------------------------------- codecs


@settings(max_examples=200, deadline=None)
@given(st.lists(_entries, max_size=8), st.sampled_from(["zstd", "none", "deflate", "snappy"]))
def test_index_manifest_round_trip(entries: list[IndexManifestEntry], compression: str) -> None:
    data = encode_index_manifest(entries, compression=compression)
    assert decode_index_manifest(data, path="<t>") == entries
    if compression in ("none", "deflate"):  # fastavro here lacks zstd and snappy
        records: list[Any] = list(fastavro.reader(io.BytesIO(data)))
        assert [r["_VERSION"] for r in records] == [1] * len(entries)
        assert all(r["_GLOBAL_INDEX"] is None for r in records)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=200))
def test_hash_index_round_trip(hashes: list[int]) -> None:
    fio, paths = InMemoryFileIO(), PathFactory("memory://t")
    meta = write_hash_index(fio, paths, np.array(hashes, dtype=np.int32))
    assert meta.index_type == HASH_INDEX and meta.row_count == len(hashes)
    assert meta.file_size == 4 * len(hashes)
    assert meta.file_name.startswith("index-")
    raw = fio.read_bytes(f"memory://t/index/{meta.file_name}")
    assert raw == b"".join(h.to_bytes(4, "big", signed=True) for h in hashes)
    assert read_hash_index(fio, paths, meta).tolist() == hashes


def test_hash_index_refuses_a_torn_file_and_other_types() -> None:
    fio, paths = InMemoryFileIO(), PathFactory("memory://t")
    fio.write_if_absent("memory://t/index/index-x", b"\x00\x00\x00")
    with pytest.raises(CorruptMetadataError, match="whole number"):
        read_hash_index(fio, paths, IndexFileMeta(HASH_INDEX, "index-x", 3, 0))
    with pytest.raises(CorruptMetadataError, match="not HASH"):
        read_hash_index(fio, paths, IndexFileMeta(DELETION_VECTORS_INDEX, "index-x", 3, 0))


def test_write_index_manifest_names_and_refuses_deletes() -> None:
    fio, paths = InMemoryFileIO(), PathFactory("memory://t")
    entry = IndexManifestEntry(FileKind.ADD, b"p", 3, IndexFileMeta(HASH_INDEX, "index-a", 8, 2))
    name = write_index_manifest(fio, paths, [entry], compression="zstd")
    assert name.startswith("index-manifest-")
    assert fio.exists(f"memory://t/manifest/{name}")
    assert read_index_manifest(fio, paths, name) == [entry]
    with pytest.raises(ValueError, match="ADD entries only"):
        write_index_manifest(fio, paths, [entry.as_delete()], compression="zstd")


def test_decode_refuses_other_versions_and_garbage() -> None:
    rec = {
        "_VERSION": 2, "_KIND": 0, "_PARTITION": b"", "_BUCKET": 0, "_INDEX_TYPE": "HASH",
        "_FILE_NAME": "f", "_FILE_SIZE": 0, "_ROW_COUNT": 0,
    }  # fmt: skip
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(INDEX_MANIFEST_AVRO_SCHEMA), [rec])
    with pytest.raises(UnsupportedFormatVersionError):
        decode_index_manifest(buf.getvalue(), path="<t>")
    with pytest.raises(CorruptMetadataError):
        decode_index_manifest(b"Obj\x01garbage", path="<t>")


def test_message_carries_index_files() -> None:
    meta = IndexFileMeta(
        DELETION_VECTORS_INDEX, "index-d", 33, 1, (DeletionVectorMeta("data-1", 1, 24, 2),)
    )
    hash_meta = IndexFileMeta(HASH_INDEX, "index-h", 4, 1, None, "s3://x/index-h")
    for msg in (
        CommitMessage(
            partition=b"p", bucket=1, total_buckets=-1,
            data_increment=DataIncrement(new_index_files=(hash_meta,)),
        ),
        CommitMessage(
            partition=b"p", bucket=1, total_buckets=-1,
            compact_increment=CompactIncrement(
                new_index_files=(meta,), deleted_index_files=(hash_meta,)
            ),
        ),
        CommitMessage(
            partition=b"p", bucket=1, total_buckets=-1,
            data_increment=DataIncrement(deleted_index_files=(meta,)),
        ),
    ):  # fmt: skip
        assert not msg.is_empty()
        assert CommitMessage.from_bytes(msg.to_bytes()) == msg


_index_files = st.lists(_metas, max_size=3).map(tuple)


@settings(max_examples=100, deadline=None)
@given(
    st.binary(min_size=12, max_size=40),
    _index_files, _index_files, _index_files, _index_files, _index_files,
)  # fmt: skip
def test_message_bytes_carry_index_files(
    partition, new, deleted, compact_new, compact_deleted, kept
):
    msg = CommitMessage(
        partition=partition, bucket=0, total_buckets=-1,
        data_increment=DataIncrement(
            new_index_files=new, deleted_index_files=deleted, kept_index_files=kept
        ),
        compact_increment=CompactIncrement(
            new_index_files=compact_new, deleted_index_files=compact_deleted
        ),
    )  # fmt: skip
    assert CommitMessage.from_bytes(msg.to_bytes()) == msg
    assert msg.is_empty() == (not (new or deleted or compact_new or compact_deleted))
    assert msg.added_index_files() == new + compact_new


# --------------------------------------------------------------------------- combine


def _e(kind: FileKind, part: bytes, bucket: int, name: str, typ: str = HASH_INDEX):
    return IndexManifestEntry(kind, part, bucket, IndexFileMeta(typ, name, 4, 1))


def test_combine_deletes_first_then_adds_replace() -> None:
    add, delete = FileKind.ADD, FileKind.DELETE
    prev = [_e(add, b"a", 0, "h0"), _e(add, b"a", 1, "h1"), _e(add, b"a", 0, "d0", "DV")]
    out = combine_index_entries(
        prev,
        [
            _e(add, b"a", 0, "h0-new"),  # replaces h0 (same partition, bucket, type)
            _e(delete, b"a", 0, "h0"),  # applied before the ADD whatever the order
            _e(delete, b"a", 1, "h1"),
            _e(add, b"b", 0, "b0"),
        ],
    )
    assert [(e.partition, e.bucket, e.index_file.file_name) for e in out] == [
        (b"a", 0, "d0"),
        (b"a", 0, "h0-new"),
        (b"b", 0, "b0"),
    ]
    assert all(e.kind == add for e in out)
    assert combine_index_entries(prev, []) == prev


def test_combine_keys_global_index_types_and_unaware_vectors_by_file_name() -> None:
    """Paimon's per-type combiners: only HASH and bucketed vectors are one file per bucket."""
    add, delete = FileKind.ADD, FileKind.DELETE
    prev = [
        _e(add, b"a", 0, "g1", "BTREE"),
        _e(add, b"a", 0, "g2", "BTREE"),
        _e(add, b"a", 0, "v1", DELETION_VECTORS_INDEX),
    ]
    # a global index type (Paimon's GlobalIndexCombiner): a DELETE drops its file only,
    # an ADD joins the bucket's other files
    out = combine_index_entries(prev, [_e(delete, b"a", 0, "g1", "BTREE"),
                                       _e(add, b"a", 0, "g3", "BTREE")])  # fmt: skip
    assert [e.index_file.file_name for e in out] == ["g2", "v1", "g3"]
    # vectors of a bucketed table (BucketedCombiner): the new file replaces the bucket's
    out = combine_index_entries(prev, [_e(add, b"a", 0, "v2", DELETION_VECTORS_INDEX)])
    assert [e.index_file.file_name for e in out] == ["g1", "g2", "v2"]
    # vectors of a bucket-unaware table (GlobalCombiner): by file name
    out = combine_index_entries(
        prev, [_e(add, b"a", 0, "v2", DELETION_VECTORS_INDEX)],
        by_file_name={DELETION_VECTORS_INDEX},
    )  # fmt: skip
    assert [e.index_file.file_name for e in out] == ["g1", "g2", "v1", "v2"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(list(FileKind)), st.sampled_from([b"a", b"b"]),
                  st.integers(0, 2), st.sampled_from([HASH_INDEX, DELETION_VECTORS_INDEX]),
                  st.text("xyz", min_size=1, max_size=2)),
        max_size=12,
    ),
    st.lists(st.tuples(st.sampled_from([b"a", b"b"]), st.integers(0, 2)), unique=True),
)  # fmt: skip
def test_combine_is_a_keyed_replace(changes, prev_keys) -> None:
    prev = [_e(FileKind.ADD, p, b, f"old-{p!r}-{b}") for p, b in prev_keys]
    entries = [_e(k, p, b, n, t) for k, p, b, t, n in changes]
    out = combine_index_entries(prev, entries)

    def key(e):
        return (e.partition, e.bucket, e.index_file.index_type)

    model = {key(e): e for e in prev}
    for e in entries:
        if e.kind == FileKind.DELETE:
            model.pop(key(e), None)
    for e in entries:
        if e.kind == FileKind.ADD:
            model[key(e)] = e
    assert {key(e): e for e in out} == model
    assert len({key(e) for e in out}) == len(out)
    assert all(e.kind == FileKind.ADD for e in out)


# --------------------------------------------------------------------------- interop


def test_reads_java_09_index_manifest_and_hash_files() -> None:
    fio, paths = LocalFileIO(), PathFactory(str(JAVA_TABLE))
    snap = json.loads((JAVA_TABLE / "snapshot" / "snapshot-1").read_text())
    entries = read_index_manifest(fio, paths, snap["indexManifest"])
    assert len(entries) == 4
    got = {
        (e.partition, e.bucket): sorted(read_hash_index(fio, paths, e.index_file).tolist())
        for e in entries
    }
    for e in entries:
        assert e.kind == FileKind.ADD and e.index_file.index_type == HASH_INDEX
        assert e.index_file.dv_ranges is None and e.index_file.external_path is None
        assert e.index_file.row_count == len(got[(e.partition, e.bucket)])
        assert e.index_file.file_size == 4 * e.index_file.row_count
    # the hash of the trimmed primary key (id; dt is the partition)
    assert got == {
        (_partition("a"), 0): _id_hashes([0, 2]),
        (_partition("a"), 1): _id_hashes([1, 3]),
        (_partition("b"), 0): _id_hashes([4]),
        (_partition("b"), 1): _id_hashes([5]),
    }


def test_snaplake_index_manifest_keeps_java_shape(tmp_path: Path) -> None:
    """What snaplake writes has Java's record names; re-encoding Java's entries is lossless."""
    fio, paths = LocalFileIO(), PathFactory(str(JAVA_TABLE))
    snap = json.loads((JAVA_TABLE / "snapshot" / "snapshot-1").read_text())
    entries = read_index_manifest(fio, paths, snap["indexManifest"])
    ours = PathFactory(str(tmp_path))
    name = write_index_manifest(fio, ours, entries, compression="zstd")
    with open(tmp_path / "manifest" / name, "rb") as f:
        schema: Any = fastavro.reader(f).writer_schema
    with open(JAVA_TABLE / "manifest" / snap["indexManifest"], "rb") as f:
        java: Any = fastavro.reader(f).writer_schema
    assert schema["name"] == "org.apache.paimon.avro.generated.record"
    ranges = {x["name"]: x["type"] for x in schema["fields"]}
    java_ranges = {x["name"]: x["type"] for x in java["fields"]}
    dv_ranges = "_DELETIONS_VECTORS_RANGES"
    assert (
        ranges[dv_ranges][1]["items"][1]["name"] == (java_ranges[dv_ranges][1]["items"][1]["name"])
    )
    assert read_index_manifest(fio, ours, name) == entries
