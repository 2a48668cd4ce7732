from __future__ import annotations

import io
from pathlib import Path

import fastavro
import pytest
from tests.helpers import avro_records

from snaplake.errors import CorruptMetadataError, InvalidOptionError
from snaplake.store.format import avro, avro_columnar, decoded_cache
from snaplake.store.format.avro import build_container, parse_container
from snaplake.store.format.avro_codecs import (
    codec_for_compression,
    compress_block,
    decompress_block,
)
from snaplake.store.format.data_file import SimpleStats
from snaplake.store.format.decoded_cache import DecodedCache
from snaplake.store.format.manifest_list import (
    MANIFEST_FILE_META_AVRO_SCHEMA,
    ManifestFileMeta,
    _meta_to_record,
    concat_manifest_lists,
    decode_manifest_list,
    encode_manifest_list,
)

TABLE = Path(__file__).resolve().parents[2] / "fixtures" / "pypaimon_table"


def meta(name: str, **kw: object) -> ManifestFileMeta:
    fields: dict[str, object] = {
        "file_name": name,
        "file_size_bytes": 100,
        "num_added_files": 1,
        "num_deleted_files": 0,
        "partition_stats": SimpleStats(
            min_values=b"a" * 12, max_values=b"b" * 12, null_counts=(0,)
        ),
        "schema_id": 0,
    }
    fields.update(kw)
    return ManifestFileMeta(**fields)  # type: ignore[arg-type]


def _lists(compression: str = "zstd") -> list[bytes]:
    return [
        encode_manifest_list([meta(f"a{i}") for i in range(3)], compression=compression),
        encode_manifest_list([], compression=compression),
        encode_manifest_list(
            [meta(f"b{i}", min_bucket=i) for i in range(400)], compression=compression
        ),
    ]


def _expected(parts: list[bytes], extra: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
    return [m for p in parts for m in decode_manifest_list(p, path="p")] + extra


@pytest.mark.parametrize("compression", ["zstd", "deflate", "none"])
def test_concat_equals_decode_reencode(compression: str) -> None:
    parts = _lists(compression)
    extra = [meta("new0"), meta("new1", total_buckets=4)]
    out = concat_manifest_lists(parts, extra)
    expected = _expected(parts, extra)
    assert decode_manifest_list(out, path="o") == expected

    # Record for record the same bytes as a fresh encode of the decoded list.
    def payload(data: bytes) -> bytes:
        c = parse_container(data, path="x")
        return b"".join(decompress_block(c.codec, b, path="x") for _, b in c.blocks)

    assert payload(out) == payload(encode_manifest_list(expected, compression=compression))


def test_concat_copies_full_blocks_verbatim_with_new_sync() -> None:
    parts = _lists()
    out = parse_container(concat_manifest_lists(parts, []), path="o")
    [big] = [b for b in parse_container(parts[2], path="p").blocks if b[0] >= 128]
    assert (big[0], bytes(big[1])) in [(n, bytes(b)) for n, b in out.blocks]
    assert all(out.sync != parse_container(p, path="p").sync for p in parts)


def test_concat_coalesces_small_blocks_of_repeated_appends() -> None:
    lst = encode_manifest_list([])
    for i in range(300):
        lst = concat_manifest_lists([lst, encode_manifest_list([meta(f"m{i}")])], [])
    counts = [n for n, _ in parse_container(lst, path="o").blocks]
    assert counts == [128, 128, 44]
    assert decode_manifest_list(lst, path="o") == [meta(f"m{i}") for i in range(300)]
    # the full blocks are carried verbatim by the next append
    nxt = concat_manifest_lists([lst], [meta("x")])
    before = parse_container(lst, path="a").blocks
    after = parse_container(nxt, path="b").blocks
    assert [bytes(b) for _, b in after[:2]] == [bytes(b) for _, b in before[:2]]


def test_concat_output_read_by_plain_fastavro() -> None:
    parts = _lists("deflate")
    out = concat_manifest_lists(parts, [meta("x")])
    records = avro_records(out)
    assert [r["_FILE_NAME"] for r in records] == [
        m.file_name for m in _expected(parts, [meta("x")])
    ]


def test_concat_golden_pypaimon_lists() -> None:
    parts = [p.read_bytes() for p in sorted((TABLE / "manifest").glob("manifest-list-*"))]
    out = concat_manifest_lists(parts, [meta("x")])
    assert decode_manifest_list(out, path="o") == _expected(parts, [meta("x")])
    # pypaimon's schema is ours, so no record was re-encoded; the small blocks merge
    assert len(parse_container(out, path="o").blocks) == 1


def test_concat_reencodes_foreign_schema_and_codec() -> None:
    # A Java-style list: other record names, no _TOTAL_BUCKETS/_EXTRA_FILES, bzip2.
    fields = [
        f
        for f in MANIFEST_FILE_META_AVRO_SCHEMA["fields"]
        if f["name"] not in ("_TOTAL_BUCKETS", "_EXTRA_FILES")
    ]
    schema = {
        "type": "record",
        "name": "record",
        "namespace": "org.apache.paimon.avro.generated",
        "fields": fields,
    }
    recs = []
    for i in range(3):
        r = _meta_to_record(meta(f"j{i}"))
        del r["_TOTAL_BUCKETS"], r["_EXTRA_FILES"]
        recs.append(r)
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), recs, codec="bzip2")
    java = buf.getvalue()
    ours = encode_manifest_list([meta("z")])
    for parts in ([java, ours], [ours, java]):
        out = concat_manifest_lists(parts, [meta("e")])
        assert decode_manifest_list(out, path="o") == _expected(parts, [meta("e")])
        assert parse_container(out, path="o").schema() == MANIFEST_FILE_META_AVRO_SCHEMA


def test_concat_nothing() -> None:
    out = concat_manifest_lists([], [])
    assert decode_manifest_list(out, path="o") == []
    assert parse_container(out, path="o").codec == "zstandard"


def test_concat_corrupt_part_raises() -> None:
    with pytest.raises(CorruptMetadataError):
        concat_manifest_lists([b"Obj\x01garbage"], [])


def test_build_and_parse_container_round_trip() -> None:
    blocks = [
        (2, compress_block("zstandard", b"\x02\x04")),
        (0, b""),
        (1, compress_block("zstandard", b"\x06")),
    ]
    data = build_container(b'"long"', "zstandard", blocks, sync=b"s" * 16)
    c = parse_container(data, path="x")
    assert c.codec == "zstandard"
    assert c.sync == b"s" * 16
    assert c.record_count == 3
    assert list(
        fastavro.reader(
            io.BytesIO(
                build_container(
                    b'"long"',
                    "null",
                    [(n, decompress_block(c.codec, b, path="x")) for n, b in c.blocks],
                )
            )
        )
    ) == [1, 2, 3]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "bad magic"),
        (b"PAR1xxxx", "bad magic"),
        (b"Obj\x01", "corrupt"),
        (b"Obj\x01\x00" + b"s" * 16, "avro.schema"),
    ],
)
def test_parse_container_errors(data: bytes, message: str) -> None:
    with pytest.raises(CorruptMetadataError, match=message) as info:
        parse_container(data, path="the/path")
    assert info.value.path == "the/path"


def test_sync_mismatch_detected() -> None:
    data = bytearray(encode_manifest_list([meta("a")], compression="none"))
    data[-1] ^= 1
    with pytest.raises(CorruptMetadataError, match="sync"):
        parse_container(bytes(data), path="x")


@pytest.mark.parametrize("codec", ["null", "zstandard", "deflate", "bzip2", "xz", "snappy"])
def test_codecs_round_trip(codec: str) -> None:
    raw = bytes(range(256)) * 40
    assert decompress_block(codec, compress_block(codec, raw), path="x") == raw


def test_deflate_is_raw_like_avro_spec() -> None:
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]},
        [{"a": i} for i in range(100)],
        codec="deflate",
    )
    c = parse_container(buf.getvalue(), path="x")
    assert c.codec == "deflate"
    assert len(decompress_block("deflate", c.blocks[0][1], path="x")) > 0


_RECORD = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}


def test_snappy_blocks_match_fastavro_both_ways() -> None:
    """Raw Snappy + big-endian CRC32 of the uncompressed block, as the Avro spec says."""
    records = [{"a": i} for i in range(5000)]
    buf = io.BytesIO()
    fastavro.writer(buf, _RECORD, records, codec="snappy")
    theirs = parse_container(buf.getvalue(), path="x")
    assert theirs.codec == "snappy"
    raw = decompress_block("snappy", theirs.blocks[0][1], path="x")
    ours = build_container(
        theirs.schema_json, "snappy", [(theirs.blocks[0][0], compress_block("snappy", raw))]
    )
    assert avro_records(ours) == records[: theirs.blocks[0][0]]


def test_snappy_manifest_lists_concat_verbatim() -> None:
    parts = _lists("snappy")
    out = concat_manifest_lists(parts, [meta("new")])
    assert parse_container(out, path="o").codec == "snappy"
    assert decode_manifest_list(out, path="o") == _expected(parts, [meta("new")])
    assert len(avro_records(out)) == 404


def test_snappy_crc_mismatch_is_corrupt() -> None:
    block = bytearray(compress_block("snappy", b"x" * 100))
    block[-1] ^= 1
    with pytest.raises(CorruptMetadataError, match="CRC32"):
        decompress_block("snappy", bytes(block), path="x")


def test_lz4_blocks_are_read_like_fastavro_writes_them() -> None:
    """fastavro's lz4 codec: ``lz4.block.compress`` (4-byte little-endian size, then the block)."""
    import cramjam

    raw = bytes(range(256)) * 40
    block = bytes(cramjam.lz4.compress_block(raw))
    assert int.from_bytes(block[:4], "little") == len(raw)
    assert decompress_block("lz4", block, path="x") == raw
    with pytest.raises(InvalidOptionError, match="no lz4 codec"):
        compress_block("lz4", raw)


def test_codec_names() -> None:
    assert codec_for_compression("zstd") == "zstandard"
    assert codec_for_compression("NONE") == "null"
    assert codec_for_compression("snappy") == "snappy"
    with pytest.raises(InvalidOptionError, match="no lz4 codec") as info:
        codec_for_compression("lz4")
    assert info.value.key == "manifest.compression"
    with pytest.raises(InvalidOptionError):
        codec_for_compression("gzip")


def test_unknown_codec_on_read_is_corrupt() -> None:
    with pytest.raises(CorruptMetadataError, match="unsupported Avro codec"):
        decompress_block("lzo", b"x", path="x")


def test_lru_cache_bounded_by_records() -> None:
    cache = DecodedCache(max_records=10)
    cache.put("a", (1,) * 4)
    cache.put("b", (1,) * 4)
    assert cache.get("a") is not None  # a is now most recent
    cache.put("c", (1,) * 4)  # evicts b
    assert cache.get("b") is None
    assert cache.get("a") is not None
    assert cache.get("c") is not None
    assert cache.record_count == 8
    cache.put("huge", (1,) * 11)  # larger than the bound: not cached
    assert cache.get("huge") is None
    cache.put("a", (1,) * 2)  # replacing updates the count
    assert cache.record_count == 6
    cache.invalidate("a")
    assert cache.record_count == 4
    cache.clear()
    assert cache.record_count == 0
    assert cache.hits == 0


def test_cached_read_keys_on_file_io_and_path() -> None:
    from snaplake.store.io.memory_file_io import InMemoryFileIO

    one, two = InMemoryFileIO(), InMemoryFileIO()
    one.write_bytes("memory://p", b"1")
    two.write_bytes("memory://p", b"2")
    calls: list[bytes] = []

    def decode(data: bytes) -> tuple[bytes, ...]:
        calls.append(data)
        return (data,)

    assert decoded_cache.cached_read(one, "memory://p", decode, use_cache=True) == (b"1",)
    assert decoded_cache.cached_read(two, "memory://p", decode, use_cache=True) == (b"2",)
    assert decoded_cache.cached_read(one, "memory://p", decode, use_cache=True) == (b"1",)
    assert calls == [b"1", b"2"]


def test_paused_gc_restores_state() -> None:
    import gc

    assert gc.isenabled()
    with avro.paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with avro.paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.skipif(not avro_columnar.columnar_available(), reason="polars not installed")
def test_columnar_and_record_decoders_agree_on_large_file() -> None:
    from tests.strategies import make_entry

    from snaplake.store.format.manifest import decode_manifest_file, encode_manifest_file

    entries = [
        make_entry(
            f"f{i}",
            bucket=i % 7,
            partition=bytes([i % 5]) * 16,
            extra_files=("x",) if i % 11 == 0 else (),
            write_cols=("a", "b") if i % 13 == 0 else None,
            value_stats_cols=() if i % 3 == 0 else None,
            value_stats=SimpleStats(
                min_values=bytes([i % 256]) * 40, max_values=b"m" * 40, null_counts=(i, None, 0)
            ),
        )
        for i in range(avro_columnar.COLUMNAR_MIN_RECORDS + 10)
    ]
    data = encode_manifest_file(entries)
    assert decode_manifest_file(data, path="m") == entries  # auto: columnar
    assert decode_manifest_file(data, path="m", columnar=False) == entries


def test_cache_resize_evicts_least_recently_used():
    from snaplake.store.format.decoded_cache import DecodedCache

    cache = DecodedCache(max_records=10)
    for i in range(5):
        cache.put(i, (1, 2))
    cache.get(0)
    cache.resize(4)
    assert cache.max_records == 4 and cache.record_count <= 4
    assert cache.get(0) is not None  # recently used survives
    assert cache.get(1) is None
