"""Columnar decoding of Avro object container files with polars, for large files.

:func:`iter_container_columns` hands a parsed container's blocks (decompressed,
as a ``null``-codec container) to ``polars.read_avro`` chunk by chunk, on a
helper thread, and returns one Python list per leaf field. Files of at least
:data:`COLUMNAR_MIN_RECORDS` records decode faster this way than record by
record (:func:`snaplake.store.format.avro.decode_container_records`), which is
the fallback when polars is missing or refuses a file. polars is optional and
imported on first use.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from snaplake.store.format.avro import AvroContainer, build_container, without_logical_types
from snaplake.store.format.avro_codecs import decompress_block

__all__ = [
    "COLUMNAR_CHUNK_RECORDS",
    "COLUMNAR_MIN_RECORDS",
    "ColumnarUnavailableError",
    "columnar_available",
    "decode_container_columns",
    "iter_container_columns",
]

COLUMNAR_MIN_RECORDS: Final[int] = 2_000
"""Files with at least this many records decode through polars when it is installed;
below it fastavro's per-file setup cost is lower."""


def _polars() -> Any:
    try:
        import polars  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return polars


def columnar_available() -> bool:
    """Return whether the columnar decoder (``polars``) can be used in this process."""
    return _polars() is not None


class ColumnarUnavailableError(Exception):
    """Internal signal: polars is missing or cannot read this file; use fastavro instead."""


COLUMNAR_CHUNK_RECORDS: Final[int] = 20_000
"""Records per chunk of the pipelined columnar decoder."""


def iter_container_columns(
    container: AvroContainer, *, path: str, chunk_records: int = COLUMNAR_CHUNK_RECORDS
) -> Iterator[dict[str, list[Any]]]:
    """Decode a container column by column with ``polars.read_avro``, chunk by chunk.

    Consecutive blocks are grouped into chunks of about ``chunk_records`` records.
    A helper thread decompresses chunk *i + 1* and parses it with polars (both
    release the GIL) while the caller turns chunk *i* into Python objects, so
    on two or more cores the native work overlaps the Python work. Blocks reach
    polars as a ``null``-codec container (polars reads no zstandard) with logical
    types removed, so ``timestamp-millis`` stays the stored long.

    Args:
        container: From :func:`parse_container`.
        path: File path, for error messages.
        chunk_records: Target records per chunk.

    Returns:
        An iterator of column dicts, one per chunk, in file order: one Python list
        per leaf field, keyed by dotted path (``_FILE._FILE_NAME``,
        ``_FILE._VALUE_STATS._NULL_COUNTS``); nested records are flattened,
        arrays are tuples (``None`` for a null array).

    Raises:
        ColumnarUnavailableError: polars is not installed or cannot read the file
            (possibly after some chunks were yielded; callers discard them and
            fall back to :func:`decode_container_records`).
        CorruptMetadataError: A block does not decompress.
    """
    pl = _polars()
    if pl is None:
        raise ColumnarUnavailableError("polars is not installed")
    schema_json = without_logical_types(container.schema_json)
    chunks: list[list[tuple[int, memoryview]]] = [[]]
    pending = 0
    for block in container.blocks:
        if pending >= chunk_records:
            chunks.append([])
            pending = 0
        chunks[-1].append(block)
        pending += block[0]

    def read_chunk(blocks: list[tuple[int, memoryview]]) -> Any:
        plain = build_container(
            schema_json,
            "null",
            [(count, decompress_block(container.codec, b, path=path)) for count, b in blocks],
            sync=container.sync,
        )
        try:
            frame = pl.read_avro(io.BytesIO(plain))
        except Exception as e:
            raise ColumnarUnavailableError(str(e)) from e
        if frame.height != sum(count for count, _ in blocks):
            raise ColumnarUnavailableError("polars returned a different row count")
        return frame

    if len(chunks) == 1:
        out: dict[str, list[Any]] = {}
        _flatten_columns(pl, read_chunk(chunks[0]), "", out)
        yield out
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snaplake-avro") as pool:
        future = pool.submit(read_chunk, chunks[0])
        for i in range(len(chunks)):
            frame = future.result()
            if i + 1 < len(chunks):
                future = pool.submit(read_chunk, chunks[i + 1])
            out = {}
            _flatten_columns(pl, frame, "", out)
            del frame
            yield out


def decode_container_columns(container: AvroContainer, *, path: str) -> dict[str, list[Any]] | None:
    """Decode a whole container column by column (see :func:`iter_container_columns`).

    Args:
        container: From :func:`parse_container`.
        path: File path, for error messages.

    Returns:
        One list per leaf field for the whole file, or ``None`` when polars is not
        installed or cannot read the file.

    Raises:
        CorruptMetadataError: A block does not decompress.
    """
    merged: dict[str, list[Any]] = {}
    try:
        for chunk in iter_container_columns(container, path=path):
            for key, values in chunk.items():
                merged.setdefault(key, []).extend(values)
    except ColumnarUnavailableError:
        return None
    return merged


def _flatten_columns(pl: Any, frame: Any, prefix: str, out: dict[str, list[Any]]) -> None:
    n = frame.height
    for name in frame.columns:
        series = frame[name]
        key = f"{prefix}{name}"
        if isinstance(series.dtype, pl.Struct):
            _flatten_columns(pl, series.struct.unnest(), f"{key}.", out)
        elif series.null_count() == n:
            out[key] = [None] * n
        elif isinstance(series.dtype, pl.List):
            # Arrays come back as tuples; an all-empty column shares one tuple.
            if series.null_count() == 0 and not series.list.len().max():
                out[key] = [()] * n
            else:
                out[key] = [None if v is None else tuple(v) for v in series.to_list()]
        elif (
            series.dtype == pl.Binary and series.null_count() == 0 and series.min() == series.max()
        ):
            # Constant (e.g. the empty min/max key of append tables): share one object.
            out[key] = [series[0]] * n
        else:
            out[key] = series.to_list()
