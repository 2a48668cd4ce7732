from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.strategies import data_file_metas, make_entry, manifest_entries, manifest_file_metas

from snaplake.store.format.data_file import DataFileMeta, data_file_meta_from_json_dict
from snaplake.store.format.manifest import (
    ManifestEntry,
    decode_manifest_file,
    encode_manifest_file,
    merge_entries,
)
from snaplake.store.format.manifest_list import (
    ManifestFileMeta,
    concat_manifest_lists,
    decode_manifest_list,
    encode_manifest_list,
)


@given(data_file_metas)
def test_data_file_meta_json_round_trip(meta: DataFileMeta) -> None:
    assert data_file_meta_from_json_dict(orjson.loads(orjson.dumps(meta.to_json_dict()))) == meta


@given(st.lists(manifest_entries, max_size=8), st.sampled_from(["zstd", "none", "deflate"]))
@settings(max_examples=60)
def test_manifest_entries_avro_round_trip(entries: list[ManifestEntry], compression: str) -> None:
    data = encode_manifest_file(entries, compression=compression)
    assert decode_manifest_file(data, path="m", columnar=False) == entries
    assert decode_manifest_file(data, path="m", columnar=True) == entries


@given(st.lists(manifest_file_metas, max_size=8), st.sampled_from(["zstd", "none"]))
@settings(max_examples=60)
def test_manifest_file_metas_avro_round_trip(
    metas: list[ManifestFileMeta], compression: str
) -> None:
    assert (
        decode_manifest_list(encode_manifest_list(metas, compression=compression), path="l")
        == metas
    )


@given(
    st.lists(st.lists(manifest_file_metas, max_size=4), max_size=4),
    st.lists(manifest_file_metas, max_size=3),
)
@settings(max_examples=40)
def test_concat_equals_concatenated_decode(
    groups: list[list[ManifestFileMeta]], extra: list[ManifestFileMeta]
) -> None:
    parts = [encode_manifest_list(g) for g in groups]
    out = concat_manifest_lists(parts, extra)
    assert decode_manifest_list(out, path="o") == [m for g in groups for m in g] + extra


@given(
    st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 1), st.booleans()), max_size=30)
)
def test_merge_entries_matches_a_simple_model(ops: list[tuple[str, int, bool]]) -> None:
    # Draw histories Paimon can produce: a file is added once, then maybe deleted once.
    entries: list[ManifestEntry] = []
    live: dict[tuple[str, int], ManifestEntry] = {}
    seen: set[tuple[str, int]] = set()
    for name, bucket, delete in ops:
        e = make_entry(name, bucket=bucket)
        key = (name, bucket)
        if delete and key in live:
            entries.append(e.as_delete())
            del live[key]
        elif not delete and key not in seen:
            entries.append(e)
            live[key] = e
            seen.add(key)
    assert merge_entries(entries) == list(live.values())
    # Merging a prefix first (a partial sequence keeps its unmatched DELETEs as
    # well as its ADDs) composes to the same result.
    for cut in range(len(entries) + 1):
        suffix = merge_entries(entries[cut:])
        assert merge_entries([*merge_entries(entries[:cut]), *suffix]) == list(live.values())
