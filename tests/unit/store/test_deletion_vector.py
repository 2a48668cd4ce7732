"""Deletion vector files byte for byte (PAIMON-MODES.md §3) and round trips of random vectors."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from snaplake.errors import CorruptMetadataError, UnsupportedTableError
from snaplake.store.format.deletion_vector import (
    DeletionVector,
    decode_deletion_vectors,
    encode_deletion_vectors,
    read_deletion_vectors,
    write_deletion_vectors_index,
)
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX, DeletionVectorMeta
from snaplake.store.format.paths import PathFactory
from snaplake.store.io.local_file_io import LocalFileIO

# The worked example of PAIMON-MODES.md §3: a file holding the vector {1, 2}.
WORKED_EXAMPLE = bytes.fromhex(
    "01 00000018 5E43F2D0 3A300000010000000000010010000000 01000200 C3366892".replace(" ", "")
)


def test_worked_example_byte_for_byte() -> None:
    data, ranges = encode_deletion_vectors(
        {"data-a.parquet": DeletionVector.from_positions([2, 1])}
    )
    assert data == WORKED_EXAMPLE
    assert len(data) == 33
    assert ranges == (DeletionVectorMeta("data-a.parquet", 1, 24, 2),)
    back = decode_deletion_vectors(WORKED_EXAMPLE, ranges, path="f")
    assert back["data-a.parquet"].positions().tolist() == [1, 2]


def test_64_bit_blob_layout() -> None:
    vector = DeletionVector.from_positions([1, 2, 2**33 + 5], bitmap64=True)
    data, (dv,) = encode_deletion_vectors({"f": vector})
    body_len = struct.unpack_from(">i", data, 1)[0]
    assert data[5:9] == bytes.fromhex("D1D33964")  # magic 1681511377, little-endian
    assert struct.unpack_from("<q", data, 9)[0] == 2  # two high 32-bit keys
    assert dv.length == body_len + 8 == len(data) - 1  # the whole blob
    crc = struct.unpack_from(">I", data, 5 + body_len)[0]
    assert crc == zlib.crc32(data[5 : 5 + body_len])
    back = decode_deletion_vectors(data, (dv,), path="f")["f"]
    assert back.bitmap64 and back.positions().tolist() == [1, 2, 2**33 + 5]


def test_an_empty_set_of_vectors_is_the_version_byte_alone() -> None:
    empty = DeletionVector.from_positions([])
    assert encode_deletion_vectors({"f": empty}) == (b"\x01", ())


positions = st.lists(st.integers(0, 2**31 - 1), max_size=300) | st.lists(
    st.integers(0, 70_000), max_size=3_000
)


@given(files=st.dictionaries(st.text("abcdef", min_size=1, max_size=6), positions, max_size=5))
def test_random_vectors_round_trip_through_a_file(files: dict[str, list[int]]) -> None:
    vectors = {name: DeletionVector.from_positions(p) for name, p in files.items()}
    data, ranges = encode_deletion_vectors(vectors)
    back = decode_deletion_vectors(data, ranges, path="f")
    assert {n: v.positions().tolist() for n, v in back.items()} == {
        n: sorted(set(p)) for n, p in files.items() if p
    }


@given(
    pos=st.lists(st.integers(0, 2**40), max_size=200),
    start=st.integers(0, 2**40),
    n=st.integers(0, 500),
)
def test_keep_mask_matches_membership(pos: list[int], start: int, n: int) -> None:
    vector = DeletionVector.from_positions(pos, bitmap64=True)
    data, ranges = encode_deletion_vectors({"f": vector})
    if ranges:
        vector = decode_deletion_vectors(data, ranges, path="f")["f"]
    chosen = set(pos)
    inside = [p - start for p in chosen if start <= p < start + n]
    mask = vector.keep_mask(n + len(inside), start=start)[:n]
    expected = np.ones(n, dtype=bool)
    expected[inside] = False
    assert mask.tolist() == expected.tolist()


def test_positions_beyond_32_bits_need_bitmap64() -> None:
    with pytest.raises(UnsupportedTableError, match="bitmap64"):
        DeletionVector.from_positions([2**31])
    with pytest.raises(ValueError, match="negative"):
        DeletionVector.from_positions([-1])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:1] + b"\x00\x00\x00\x19" + b[5:], "disagrees"),  # L changed
        (lambda b: b[:5] + b"\x00\x00\x00\x00" + b[9:], "unknown magic"),
        (lambda b: b[:20] + bytes([b[20] ^ 0xFF]) + b[21:], "CRC32"),
        (lambda b: b[:20], "disagrees"),  # truncated
        (lambda b: b"\x02" + b[1:], "version 2"),
        (lambda b: b"", "empty"),
    ],
)
def test_a_damaged_file_is_corrupt_metadata_naming_it(
    damage: Callable[[bytes], bytes], message: str
) -> None:
    ranges = (DeletionVectorMeta("data-a.parquet", 1, 24, 2),)
    with pytest.raises(CorruptMetadataError, match=message) as info:
        decode_deletion_vectors(damage(WORKED_EXAMPLE), ranges, path="/t/index/index-x-0")
    assert info.value.path == "/t/index/index-x-0"


def test_cardinality_disagreeing_with_the_manifest_is_corrupt() -> None:
    ranges = (DeletionVectorMeta("data-a.parquet", 1, 24, 3),)
    with pytest.raises(CorruptMetadataError, match="3"):
        decode_deletion_vectors(WORKED_EXAMPLE, ranges, path="f")


def test_write_then_read_an_index_file(tmp_path: Path) -> None:
    file_io = LocalFileIO()
    paths = PathFactory(str(tmp_path / "t"))
    vectors = {
        "a": DeletionVector.from_positions([0, 5, 9]),
        "b": DeletionVector.from_positions(np.arange(0, 100_000, 3)),
    }
    meta = write_deletion_vectors_index(file_io, paths, vectors)
    assert meta.index_type == DELETION_VECTORS_INDEX
    assert meta.row_count == 2
    assert meta.file_size == (tmp_path / "t" / "index" / meta.file_name).stat().st_size
    assert read_deletion_vectors(file_io, paths, meta) == vectors
