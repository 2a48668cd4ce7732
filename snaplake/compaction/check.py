"""Check the live data files of a snapshot against what their manifest entries record.

Readers trust a file's recorded facts, as Paimon's do: a value-stats maximum
below the file's values prunes the file from a filtered read, a key range
that is too narrow lets two versions of a key escape the merge (and a full
compaction then persists both), a wrong row count or sequence range misleads
planning. :func:`check_snapshot_files` reads every live data file of one
snapshot and compares, per file:

- existence and ``_FILE_SIZE`` (the size on storage);
- ``_ROW_COUNT`` (rows in the file);
- ``_VALUE_STATS`` over the columns they were recorded for
  (``_VALUE_STATS_COLS``, else every column of the file's schema): each
  recorded null count must equal the file's, a recorded minimum must be at
  most and a recorded maximum at least every value (bounds may be wider:
  Paimon truncates long strings; a column whose bounds were not recorded, or
  that holds NaN, or whose type has no bounds, is not compared);
- primary-key tables: ``_KEY_STATS`` likewise; ``_MIN_KEY`` / ``_MAX_KEY``
  must equal the file's first and last key, the rows must be sorted by key
  with each key once; ``_MIN_SEQUENCE_NUMBER`` / ``_MAX_SEQUENCE_NUMBER``
  must equal the extremes of ``_SEQUENCE_NUMBER``; ``_DELETE_ROW_COUNT``
  (when recorded) must equal the ``-U``/``-D`` rows.

Every contradiction becomes one :class:`FileMismatch` naming the file, the
manifest field (Paimon's spelling) and the column; nothing is repaired and
nothing is written. A file that cannot be read is a mismatch of its own.

Files are read in their own schema (``_SCHEMA_ID``), in bounded batches.

Source: the fields of Paimon ``DataFileMeta``, ``SimpleStats`` and
``KeyValue``; the facts Paimon's writers record (``KeyValueDataFileWriter``,
``RowDataFileWriter``, ``SimpleStatsCollector``). Paimon has no such check.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import (
    CorruptMetadataError,
    SnaplakeError,
    StorageError,
    UnsupportedTypeError,
)
from snaplake.mergetree.groups import group_starts, sort_indices_nulls_first
from snaplake.mergetree.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind, key_column, kv_schema
from snaplake.mergetree.read import read_kv_file
from snaplake.mergetree.sorted_run import java_order_key
from snaplake.store.format.binary_row import (
    Timestamp,
    binary_row_arity,
    decode_binary_row,
    encode_binary_row,
)
from snaplake.store.format.data_file import DataFileMeta, SimpleStats
from snaplake.store.format.file_format import format_of_file
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.format.stats import SimpleStatsParts, ValueStatsCollector
from snaplake.store.format.types import DataType
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan

__all__ = ["CheckResult", "FileMismatch", "check_snapshot_files"]

_BATCH_ROWS = 65_536
_EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class FileMismatch:
    """One fact a manifest entry records about a data file that the file contradicts.

    Attributes:
        path: Full path of the data file.
        field: The manifest field, as Paimon spells it (``_FILE_NAME`` for a
            missing or unreadable file, ``_FILE_SIZE``, ``_ROW_COUNT``,
            ``_VALUE_STATS._MAX_VALUES``, ``_KEY_STATS._NULL_COUNTS``,
            ``_MIN_KEY``, ``_MAX_SEQUENCE_NUMBER``, ``_DELETE_ROW_COUNT``, ...),
            or ``rows`` for a key/value file whose rows are not sorted by key
            with each key once.
        column: The column the field is about, for stats; else ``None``.
        recorded: The recorded value (decoded: numbers, strings, dates, key tuples).
        actual: What the file holds (``None`` when it cannot be known).
        message: One sentence saying what is wrong.
    """

    path: str
    field: str
    column: str | None
    recorded: Any
    actual: Any
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """What :func:`check_snapshot_files` found.

    Attributes:
        snapshot_id: The snapshot whose live files were checked (``None``: the
            table has no snapshot, nothing was checked).
        files_checked: Live data files examined.
        rows_checked: Rows read from them.
        bytes_checked: Bytes of the files that exist.
        mismatches: Every contradiction found, file by file.
        duration_s: Wall time, seconds.
    """

    snapshot_id: int | None
    files_checked: int = 0
    rows_checked: int = 0
    bytes_checked: int = 0
    mismatches: tuple[FileMismatch, ...] = ()
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no file contradicts its manifest entry."""
        return not self.mismatches

    @property
    def bad_files(self) -> tuple[str, ...]:
        """Paths of the files with at least one mismatch, in check order, once each."""
        return tuple(dict.fromkeys(m.path for m in self.mismatches))


def check_snapshot_files(
    *,
    file_io: FileIO,
    paths: PathFactory,
    schema_manager: SchemaManager,
    snapshot: Snapshot | None,
    key_fields: Sequence[str],
) -> CheckResult:
    """Check every live data file of ``snapshot`` against its manifest entry.

    Args:
        file_io: Storage of the table.
        paths: The table's path factory.
        schema_manager: Reads the schema each file was written with.
        snapshot: The snapshot to check; ``None`` (an empty table) checks nothing.
        key_fields: The key columns of the table's data files (its FileStore's
            ``key_fields``): non-empty, the files are key-value files and their
            keys, sequence numbers and row kinds are checked too; empty, they
            hold rows only.

    Returns:
        The counts and every mismatch (see the module docstring for what is compared).

    Raises:
        CorruptMetadataError: a manifest list or manifest of the snapshot is
            undecodable, or a schema file is (the data files are not reached).
        FileNotFoundError: a manifest list or manifest is missing.
        StorageError: the storage failed (not a finding about a file).

    Storage:
        Reads the snapshot's manifests and every live data file in full
        (batch by batch); writes and deletes nothing.
    """
    start = time.monotonic()
    if snapshot is None:
        return CheckResult(snapshot_id=None)
    scan = FileStoreScan(
        file_io=file_io, paths=paths, schema_manager=schema_manager, snapshot=snapshot
    )
    mismatches: list[FileMismatch] = []
    files = rows = size = 0
    for split in scan.plan():
        for meta, path in zip(split.files, split.paths, strict=True):
            schema = schema_manager.schema(meta.schema_id)
            found, content = _check_file(file_io, path, meta, schema, key_fields)
            mismatches.extend(found)
            files += 1
            if content is not None:
                rows += content.rows
                size += content.size
    return CheckResult(
        snapshot_id=snapshot.id,
        files_checked=files,
        rows_checked=rows,
        bytes_checked=size,
        mismatches=tuple(mismatches),
        duration_s=time.monotonic() - start,
    )


# ------------------------------------------------------------------------- content


@dataclass(slots=True)
class _Content:
    """What one pass over a data file measured."""

    size: int
    rows: int = 0
    value_stats: SimpleStatsParts | None = None
    key_stats: SimpleStatsParts | None = None
    first_key: tuple[Any, ...] | None = None
    last_key: tuple[Any, ...] | None = None
    min_seq: int | None = None
    max_seq: int | None = None
    retracts: int = 0
    order_error: str | None = None
    last_order: tuple[Any, ...] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class _Layout:
    """How to read one file and which columns its stats cover."""

    arrow_schema: pa.Schema
    stats_names: tuple[str, ...]
    stats_types: tuple[DataType, ...]
    key_names: tuple[str, ...]
    key_types: tuple[DataType, ...]


def _layout(
    meta: DataFileMeta, schema: TableSchema, key_fields: Sequence[str]
) -> tuple[_Layout, list[str]]:
    """The file's read schema and stats columns; names the stats cover that it lacks."""
    names = list(meta.value_stats_cols) if meta.value_stats_cols is not None else None
    all_names = schema.field_names
    if names is None:
        names = all_names
    missing = [n for n in names if n not in all_names]
    names = [n for n in names if n in all_names]
    keys = tuple(key_fields)
    value = schema.arrow_schema
    if not keys and meta.write_cols is not None:
        value = pa.schema([value.field(n) for n in meta.write_cols if n in value.names])
        names = [n for n in names if n in value.names]
    arrow = kv_schema(value, keys) if keys else value
    return (
        _Layout(
            arrow_schema=arrow,
            stats_names=tuple(names),
            stats_types=tuple(schema.field_type(n) for n in names),
            key_names=tuple(keys),
            key_types=tuple(schema.field_type(k) for k in keys),
        ),
        missing,
    )


def _batches(file_io: FileIO, path: str, layout: _Layout) -> Iterator[pa.Table]:
    if layout.key_names:
        return read_kv_file(file_io, path, layout.arrow_schema, batch_rows=_BATCH_ROWS)
    return _plain_batches(file_io, path, layout.arrow_schema)


def _plain_batches(file_io: FileIO, path: str, schema: pa.Schema) -> Iterator[pa.Table]:
    fmt = format_of_file(path)
    with file_io.open_input(path) as source:
        yield from fmt.iter_batches(source, schema, batch_rows=_BATCH_ROWS)


def _scan(file_io: FileIO, path: str, size: int, layout: _Layout) -> _Content:
    content = _Content(size=size)
    values = ValueStatsCollector(layout.stats_types, stats_mode="full")
    keys = ValueStatsCollector(layout.key_types, stats_mode="full") if layout.key_names else None
    key_cols = [key_column(k) for k in layout.key_names]
    for batch in _batches(file_io, path, layout):
        n = batch.num_rows
        if n == 0:
            continue
        content.rows += n
        values.update(batch.select(list(layout.stats_names)))
        if keys is None:
            continue
        keys.update(batch.select(key_cols))
        bounds = pc.min_max(batch.column(SEQUENCE_NUMBER))
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        content.min_seq = lo if content.min_seq is None else min(content.min_seq, lo)
        content.max_seq = hi if content.max_seq is None else max(content.max_seq, hi)
        kinds = np.asarray(batch.column(VALUE_KIND).to_numpy(), dtype=np.int8)
        content.retracts += int(
            np.count_nonzero((kinds == RowKind.UPDATE_BEFORE) | (kinds == RowKind.DELETE))
        )
        _track_keys(content, batch, layout)
    content.value_stats = values.result()
    content.key_stats = keys.result() if keys is not None else None
    return content


def _key_at(batch: pa.Table, layout: _Layout, i: int) -> tuple[Any, ...]:
    """Row ``i``'s key as a decoded BinaryRow (the values the writer would record)."""
    raw = [batch.column(key_column(k))[i].as_py() for k in layout.key_names]
    return decode_binary_row(encode_binary_row(raw, layout.key_types), layout.key_types)


def _track_keys(content: _Content, batch: pa.Table, layout: _Layout) -> None:
    """First and last key of the file; whether rows are sorted by key, each key once."""
    n = batch.num_rows
    first, last = _key_at(batch, layout, 0), _key_at(batch, layout, n - 1)
    if content.first_key is None:
        content.first_key = first
    if content.order_error is None:
        before = content.last_order
        if before is not None and java_order_key(first) <= before:
            content.order_error = "rows are not sorted by primary key, each key once"
        else:
            key_cols = batch.select([key_column(k) for k in layout.key_names])
            order = sort_indices_nulls_first(key_cols, ["ascending"] * key_cols.num_columns)
            if not np.array_equal(np.asarray(order.to_numpy()), np.arange(n)):
                content.order_error = "rows are not sorted by primary key"
            elif len(group_starts(batch, layout.key_names)) != n:
                content.order_error = "a primary key occurs in more than one row"
    content.last_key = last
    content.last_order = java_order_key(last)


# ---------------------------------------------------------------------- comparing


def _check_file(
    file_io: FileIO, path: str, meta: DataFileMeta, schema: TableSchema, key_fields: Sequence[str]
) -> tuple[list[FileMismatch], _Content | None]:
    out: list[FileMismatch] = []

    def bad(name: str, recorded: Any, actual: Any, message: str, column: str | None = None) -> None:
        out.append(
            FileMismatch(
                path=path,
                field=name,
                column=column,
                recorded=recorded,
                actual=actual,
                message=message,
            )
        )

    try:
        status = file_io.file_status(path)
    except FileNotFoundError:
        bad("_FILE_NAME", meta.file_name, None, "the data file does not exist")
        return out, None
    if status.size_bytes != meta.file_size_bytes:
        bad(
            "_FILE_SIZE",
            meta.file_size_bytes,
            status.size_bytes,
            "the file's size on storage differs from the recorded size",
        )
    layout, missing = _layout(meta, schema, key_fields)
    for name in missing:
        bad(
            "_VALUE_STATS_COLS",
            name,
            None,
            f"stats are recorded for {name!r}, which schema {schema.id} does not have",
            column=name,
        )
    try:
        content = _scan(file_io, path, status.size_bytes, layout)
    except StorageError:
        raise
    except FileNotFoundError:
        bad("_FILE_NAME", meta.file_name, None, "the data file does not exist")
        return out, None
    except (OSError, pa.ArrowException, SnaplakeError) as exc:
        reason = " ".join(str(exc).split())[:300]
        bad(
            "_FILE_NAME",
            meta.file_name,
            None,
            f"the data file cannot be read with schema {schema.id}: {type(exc).__name__}: {reason}",
        )
        return out, None
    if content.rows != meta.row_count:
        bad("_ROW_COUNT", meta.row_count, content.rows, "the file holds another number of rows")
    assert content.value_stats is not None
    _compare_stats(
        bad,
        "_VALUE_STATS",
        meta.value_stats,
        content.value_stats,
        layout.stats_names,
        layout.stats_types,
    )
    if layout.key_names:
        _compare_keys(bad, meta, content, layout)
    return out, content


_Bad = Callable[..., None]


def _compare_keys(bad: _Bad, meta: DataFileMeta, content: _Content, layout: _Layout) -> None:
    assert content.key_stats is not None
    _compare_stats(
        bad, "_KEY_STATS", meta.key_stats, content.key_stats, layout.key_names, layout.key_types
    )
    if content.order_error is not None:
        bad("rows", None, None, content.order_error)
    for name, recorded, actual in (
        ("_MIN_KEY", meta.min_key, content.first_key),
        ("_MAX_KEY", meta.max_key, content.last_key),
    ):
        try:
            decoded = decode_binary_row(recorded, layout.key_types)
        except (CorruptMetadataError, UnsupportedTypeError) as exc:
            bad(name, recorded, actual, f"the recorded key does not decode: {exc}")
            continue
        if actual is not None and java_order_key(decoded) != java_order_key(actual):
            which = "first" if name == "_MIN_KEY" else "last"
            bad(name, decoded, actual, f"the recorded key is not the file's {which} key")
    for name, recorded_seq, actual_seq in (
        ("_MIN_SEQUENCE_NUMBER", meta.min_sequence_number, content.min_seq),
        ("_MAX_SEQUENCE_NUMBER", meta.max_sequence_number, content.max_seq),
    ):
        if actual_seq is not None and recorded_seq != actual_seq:
            bad(
                name,
                recorded_seq,
                actual_seq,
                "the recorded sequence number is not the extreme of _SEQUENCE_NUMBER",
            )
    if meta.delete_row_count is not None and meta.delete_row_count != content.retracts:
        bad(
            "_DELETE_ROW_COUNT",
            meta.delete_row_count,
            content.retracts,
            "the file holds another number of -U/-D rows",
        )


def _compare_stats(
    bad: _Bad,
    name: str,
    recorded: SimpleStats,
    actual: SimpleStatsParts,
    names: Sequence[str],
    types: Sequence[DataType],
) -> None:
    """Recorded stats must bound the file's values and count its nulls exactly."""
    counts = recorded.null_counts
    try:
        arity = binary_row_arity(recorded.min_values)
    except CorruptMetadataError:
        arity = -1
    if not counts and arity == 0:
        return  # nothing recorded (EMPTY_STATS): readers prune nothing
    if counts is not None and len(counts) != len(names):
        bad(
            name,
            len(counts),
            len(names),
            f"{len(counts)} null counts recorded for {len(names)} columns",
        )
        return
    try:
        mins = decode_binary_row(recorded.min_values, types)
        maxs = decode_binary_row(recorded.max_values, types)
    except (CorruptMetadataError, UnsupportedTypeError) as exc:
        bad(name, None, None, f"the recorded min/max rows do not decode: {exc}")
        return
    real_mins = decode_binary_row(actual.min_values, types)
    real_maxs = decode_binary_row(actual.max_values, types)
    for i, column in enumerate(names):
        if counts is not None and counts[i] is not None and counts[i] != actual.null_counts[i]:
            bad(
                f"{name}._NULL_COUNTS",
                counts[i],
                actual.null_counts[i],
                "the recorded null count differs from the file's",
                column=column,
            )
        if not _at_most(mins[i], real_mins[i]):
            bad(
                f"{name}._MIN_VALUES",
                mins[i],
                real_mins[i],
                "the recorded minimum is above the file's smallest value",
                column=column,
            )
        if not _at_most(real_maxs[i], maxs[i]):
            bad(
                f"{name}._MAX_VALUES",
                maxs[i],
                real_maxs[i],
                "the recorded maximum is below the file's largest value",
                column=column,
            )


def _at_most(low: Any, high: Any) -> bool:
    """``low <= high`` for decoded stats values; True when either is unknown or incomparable."""
    if low is None or high is None:
        return True
    try:
        return bool(_stat_key(low) <= _stat_key(high))
    except TypeError:
        return True


def _stat_key(value: Any) -> Any:
    """A comparable form: timestamps and dates chronologically whatever their decoded type.

    Floats compare as Python compares them (``-0.0 == 0.0``; a NaN bound
    compares false, so it is reported), which is how reads prune with them.
    """
    if isinstance(value, dt.datetime):
        value = Timestamp.from_datetime(value)
    if isinstance(value, Timestamp):
        return (value.millisecond, value.nano_of_millisecond)
    if isinstance(value, dt.date):
        return (value - _EPOCH).days
    return value
