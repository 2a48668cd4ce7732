"""KeyValueTableWrite: upserts and deletes into a primary-key table, as level-0 sorted runs.

``write_arrow(rows, row_kinds=...)`` validates the rows against the schema,
turns the row kinds (or the ``rowkind.field`` column) into ``_VALUE_KIND``
bytes, drops what ``ignore-delete`` / ``ignore-update-before`` say to drop,
refuses retractions the merge engine cannot take, assigns each row the next
sequence number of its bucket, and buffers it per (partition, bucket). A
flush (at ``prepare_commit``, or when the buffers exceed ``write-buffer-size``)
sorts each bucket's rows by key, folds equal keys with the merge engine and
writes them as level-0 files rolled at ``target-file-size``: one new sorted
run per bucket and flush. Everything is vectorised. With
``changelog-producer = input`` each flush also writes the rows as written
(sorted into merge order, not folded: one key may repeat, every row kind
kept) as level-0 changelog files, which the CommitMessage carries in its
``DataIncrement.changelog_files``.

Sequence numbers continue from the largest ``_MAX_SEQUENCE_NUMBER`` of each
bucket's live files in the latest snapshot, read once per writer (again
after an ``abort``), and keep counting across ``prepare_commit`` calls (one
writer per bucket at a time).

Source: Paimon ``TableWriteImpl`` (``RowKindFilter``, ``RowKindGenerator``),
``KeyValueFileStoreWrite`` / ``AbstractFileStoreWrite`` (sequence restore),
``MergeTreeWriter`` (``write``, ``flushWriteBuffer``),
``SortBufferWriteBuffer.forEach``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from functools import partial
from typing import ClassVar, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.commit.message import CommitMessage
from snaplake.errors import SchemaMismatchError
from snaplake.mergetree.groups import sort_key_value
from snaplake.mergetree.kv import RowKind, parse_row_kinds, to_key_value
from snaplake.mergetree.merge_function import (
    AggregateMergeFunction,
    MergeSpec,
    merge_function_for,
    merge_sorted,
    merge_sorted_runs,
)
from snaplake.options import CoreOptions
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.primary_key import RETRACTABLE_FUNCTIONS, MergeEngine
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan
from snaplake.write.bucket_buffer import BucketBuffer, PendingBucket
from snaplake.write.cross_partition import BucketIndex
from snaplake.write.kv_file_writer import (
    SMALL_FILE_ROWS,
    FileSummary,
    KeyValueFileWriter,
    WrittenFile,
)
from snaplake.write.table_write import RowKinds, conform_to_schema

__all__ = [
    "KeyValueTableWrite",
    "Level0Lift",
    "SequenceRestore",
    "dropped_row_kinds",
    "restore_max_sequences",
]

SequenceRestore = Callable[[], Mapping[tuple[bytes, int], int]]
"""Returns ``{(partition, bucket): max sequence number}`` of the latest snapshot's live files."""

_KINDS_COLUMN = "_VALUE_KIND"


class Level0Lift(Protocol):
    """Compacts a writer's new level-0 files up before ``prepare_commit`` returns.

    Given the prepared messages, returns them with the lift's compaction in
    the same messages (the level-0 files deleted, their outputs added). The
    FileStore composes it for first-row tables (unless ``write-only``):
    Paimon's readers skip level 0 of such tables.

    Source: Paimon ``MergeTreeWriter`` with a lookup compaction
    (``LookupMergeTreeCompactRewriter``) for first-row tables.
    """

    def __call__(self, messages: list[CommitMessage]) -> list[CommitMessage]:
        """Return ``messages`` with their level-0 files compacted up (outputs written)."""


class KeyValueTableWrite:
    """The :class:`~snaplake.write.table_write.TableWrite` of a primary-key table.

    Writes upserts and deletes and prepares CommitMessages. Built by
    ``KeyValueFileStore.new_write`` (``table.new_write``); see ``TableWrite``
    for the failure and reuse rules. Reusable across ``prepare_commit`` calls
    (sequence numbers keep increasing).

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema: The table schema (with primary keys).
        commit_user: Recorded for logs only.
        restore_sequences: Reads each bucket's largest sequence number in the
            latest snapshot; called once, at the first write.
        lift_level0: Compacts the prepared level-0 files up before
            ``prepare_commit`` returns (see :class:`Level0Lift`); ``None`` =
            they stay at level 0.
        bucket_index: Dynamic buckets (``bucket = -1``): assigns each row's
            bucket and adds each changed bucket's new HASH file to its
            message at ``prepare_commit``; cross-partition tables also
            rewrite each batch (keys moving partition); ``None`` = fixed buckets.

    The caller has checked the schema (``FileStore.new_write`` runs
    ``check_supported(WRITE)``).

    Raises:
        InvalidOptionError: an unknown merge engine or aggregate function.

    Source: Paimon ``KeyValueFileStoreWrite`` / ``MergeTreeWriter``.
    """

    _FLUSH_SORTS: ClassVar[bool] = True
    """A flush sorts and folds each bucket's rows (:meth:`_write_level0_runs`); a
    subclass whose flush writes them otherwise sets it false, and its buckets are then
    flushed one by one through its own ``_write_level0_runs``."""

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        schema: TableSchema,
        commit_user: str,
        restore_sequences: SequenceRestore,
        lift_level0: Level0Lift | None = None,
        bucket_index: BucketIndex | None = None,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.commit_user = commit_user
        opts = schema.core_options
        self.spec: MergeSpec = merge_function_for(schema)
        self._target = opts.target_file_size(has_primary_key=True)
        self._write_buffer = opts.write_buffer_size
        self._restore = restore_sequences
        self._lift_level0 = lift_level0
        self._bucket_index = bucket_index
        self._buffer = BucketBuffer(
            file_io=file_io, paths=paths, schema=schema, flush=self._write_level0_runs,
            assign=None if bucket_index is None else bucket_index.assign,
            flush_many=self._write_level0_many,
        )  # fmt: skip
        self._input_changelog = opts.changelog_producer == "input"
        self._sequences: dict[tuple[bytes, int], int] | None = None
        self._restore_lock = threading.Lock()

    # ------------------------------------------------------------------ public
    def write_arrow(
        self,
        data: pa.Table | pa.RecordBatch,
        *,
        row_kinds: RowKinds | None = None,
    ) -> None:
        """Buffer upserts (and, with ``row_kinds``, retractions) for the next ``prepare_commit``.

        Args:
            data: Rows whose columns match the table schema by name (see
                :func:`~snaplake.write.table_write.conform_to_schema`).
            row_kinds: One kind per row: ``'+I' '-U' '+U' '-D'`` strings or
                int8 0..3 (``None`` = all ``+I``). Not allowed together with
                the ``rowkind.field`` option, which takes the kinds from that
                column.

        Raises:
            SchemaMismatchError: before anything is buffered, when a column is
                missing or mistyped, a key column holds nulls, a row kind is
                unknown, or the merge engine cannot take a retraction (a
                first-row table, a partial-update table without
                ``ignore-delete``/``partial-update.remove-record-on-delete``, an
                aggregate function that cannot retract).
            ValueError: the writer is closed or failed before.
            MergeFunctionError: a buffer flushed on ``write-buffer-size`` holds
                versions the merge engine rejects.
            StorageError: writing a flushed buffer's files failed (``.path``
                names the file). After this or a ``MergeFunctionError`` the
                writer has deleted its unprepared files and dropped its rows
                (see :class:`~snaplake.write.table_write.TableWrite`).

        Storage: may write level-0 data files when the buffers exceed
        ``write-buffer-size`` (invisible until committed).
        """
        self._buffer.check_usable()
        table = conform_to_schema(data, self.schema)
        kinds = self._kinds(table, row_kinds)
        kinds_arr = pa.array(kinds, type=pa.int8())
        table, kinds_arr = self._filter_kinds(table, kinds_arr)
        if table.num_rows == 0:
            return
        self._check_retractions(kinds_arr)
        if self._bucket_index is not None:
            table, kinds_arr = self._bucket_index.rewrite_rows(table, kinds_arr)
        grouped, ranges = self._buffer.route_ranges(table.append_column(_KINDS_COLUMN, kinds_arr))
        if not ranges:  # a cross-partition rewrite can leave no rows
            return
        kinds = np.asarray(grouped.column(_KINDS_COLUMN).to_numpy(), dtype=np.int8)
        sequences = np.concatenate(
            [self._sequence_numbers(p, b, e - s) for p, _, b, s, e in ranges]
        )
        kv = to_key_value(  # one key/value table for the whole batch, sliced per bucket
            grouped.drop_columns([_KINDS_COLUMN]), self.spec.key_names, sequences, kinds
        )
        for partition, part_path, bucket, s, e in ranges:
            self._buffer.add(partition, part_path, self._buffer_bucket(bucket), kv.slice(s, e - s))
            # One memory pool for all buckets: flush the largest buffer first (Paimon's
            # write buffers share a pool and the biggest owner is flushed).
            while self._buffer.nbytes >= self._write_buffer:
                self._buffer.flush([self._buffer.largest()])

    def delete_arrow(self, keys: pa.Table | pa.RecordBatch) -> None:
        """Buffer ``-D`` rows for the keys in ``keys``.

        Args:
            keys: Rows holding at least the primary-key columns; other columns
                are taken when present and null otherwise (the merge engines
                only use a delete's key, except partial-update's
                ``remove-record-on-delete`` and ``ignore-delete`` seeding).

        Raises:
            SchemaMismatchError: a primary-key column is missing or null, a
                NOT NULL value column is missing, or the table cannot take
                deletes (see :meth:`write_arrow`).
        """
        table = pa.Table.from_batches([keys]) if isinstance(keys, pa.RecordBatch) else keys
        missing = [k for k in self.schema.primary_keys if k not in table.column_names]
        if missing:
            raise SchemaMismatchError(
                f"delete_arrow needs the primary-key columns {list(self.schema.primary_keys)}; "
                f"missing {missing}"
            )
        columns = []
        for f in self.schema.arrow_schema:
            if f.name in table.column_names:
                columns.append(table.column(f.name))
            elif not f.nullable:
                raise SchemaMismatchError(
                    f"column {f.name!r} is NOT NULL, so a delete row needs its value; pass "
                    "full rows to delete_arrow"
                )
            else:
                columns.append(pa.nulls(table.num_rows, type=f.type))
        full = pa.Table.from_arrays(columns, names=self.schema.arrow_schema.names)
        rowkind = self.schema.core_options.rowkind_field
        if rowkind is not None:
            full = full.set_column(
                full.column_names.index(rowkind),
                rowkind,
                pa.array([RowKind.DELETE.short_string] * full.num_rows, type=pa.string()),
            )
            self.write_arrow(full)
            return
        self.write_arrow(full, row_kinds=np.full(full.num_rows, RowKind.DELETE, dtype=np.int8))

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush every bucket into level-0 files; return one CommitMessage per bucket.

        On a first-row table (unless ``write-only``) the new files are also
        compacted up with lookup, in the same messages.

        Raises:
            MergeFunctionError: the merge engine rejects a key's versions.
            StorageError: writing the files failed (``.path`` names the file).
                After this or a ``MergeFunctionError`` every file written since
                the last ``prepare_commit`` is deleted and the writer refuses
                further writes (see :class:`~snaplake.write.table_write.TableWrite`).
            ValueError: the writer failed before.

        Storage: writes the buffered rows as data files (and the compaction
        outputs); on a failure deletes them.
        """
        messages = self._buffer.prepare_commit()
        try:
            if self._bucket_index is not None:
                messages = self._bucket_index.prepare_commit(messages)
            if self._lift_level0 is None or not messages:
                return messages
            return self._lift_level0(messages)
        except BaseException as exc:
            if self._bucket_index is not None:
                self._bucket_index.abort(messages)
            self._buffer.discard(exc, messages)
            raise

    def abort(self, messages: Sequence[CommitMessage] | None = None) -> None:
        """Abandon this write: delete data files that will never be committed.

        Args:
            messages: Messages returned by :meth:`prepare_commit` that will not
                be committed; the data and changelog files they add are
                deleted. Files this writer wrote since the last
                ``prepare_commit`` are always deleted, and buffered rows are
                dropped. ``None`` = only that.

        Each bucket's sequence number is read again at the next write (other
        writers may have committed since: a row written again continues
        after theirs).

        Storage: deletes data, changelog and HASH index files only; never metadata.
        """
        if self._bucket_index is not None:  # the HASH index files they add (dynamic buckets)
            self._bucket_index.abort(messages or ())
        self._buffer.abort(messages or ())
        with self._restore_lock:
            self._sequences = None

    def close(self) -> None:
        """Drop buffered rows (files already written stay until committed or aborted)."""
        self._buffer.close()

    def ignore_previous_files(self) -> None:
        """The messages overwrite their partitions: restore no HASH index (dynamic buckets).

        Sequence numbers still continue from the latest snapshot (harmless
        for an overwrite, and they stay increasing per bucket).

        Source: Paimon ``TableWriteImpl.withIgnorePreviousFiles``.
        """
        if self._bucket_index is not None:
            self._bucket_index.ignore_previous_files()

    # ------------------------------------------------------------- validation
    def _kinds(
        self,
        table: pa.Table,
        row_kinds: RowKinds | None,
    ) -> npt.NDArray[np.int8]:
        field = self.schema.core_options.rowkind_field
        if field is not None:
            if row_kinds is not None:
                raise SchemaMismatchError(
                    f"the table takes row kinds from its rowkind.field column {field!r}; "
                    "do not pass row_kinds as well"
                )
            return parse_row_kinds(table.column(field), table.num_rows)
        if row_kinds is None:
            return np.zeros(table.num_rows, dtype=np.int8)
        return parse_row_kinds(row_kinds, table.num_rows)

    def _filter_kinds(self, table: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        dropped = dropped_row_kinds(self.schema.core_options)
        if not dropped:
            return table, kinds
        drop = pc.is_in(kinds, value_set=pa.array(sorted(dropped), pa.int8()))
        if not pc.any(drop).as_py():
            return table, kinds
        keep = pc.invert(drop)
        return table.filter(keep), kinds.filter(keep)

    def _check_retractions(self, kinds: pa.Array) -> None:
        retract = pc.or_(pc.equal(kinds, 1), pc.equal(kinds, 3))
        if not pc.any(retract).as_py():
            return
        opts = self.schema.core_options
        engine = MergeEngine(opts.merge_engine)
        if engine is MergeEngine.FIRST_ROW:
            raise SchemaMismatchError(
                "the first-row merge engine cannot take -U/-D rows; set the option "
                "'ignore-delete' = 'true' to drop them"
            )
        if engine is MergeEngine.PARTIAL_UPDATE and not opts.partial_update_remove_record_on_delete:
            raise SchemaMismatchError(
                "a partial-update table cannot take -U/-D rows by default; set "
                "'partial-update.remove-record-on-delete' = 'true' (a -D removes the row) or "
                "'ignore-delete' = 'true' (drop them)"
            )
        if engine is MergeEngine.AGGREGATION:
            function = self.spec.function
            assert isinstance(function, AggregateMergeFunction)
            functions, ignored = function.functions, function.ignore_retract
            stuck = sorted(
                n
                for n, f in functions.items()
                if f not in RETRACTABLE_FUNCTIONS and n not in ignored
            )
            if stuck:
                raise SchemaMismatchError(
                    f"-U/-D rows cannot be aggregated into column(s) {stuck} (their functions "
                    "cannot retract); set 'fields.<column>.ignore-retract' = 'true' for them"
                )

    # ----------------------------------------------------------------- buffer
    def _buffer_bucket(self, bucket: int) -> int:
        """The bucket rows routed to ``bucket`` are buffered and written in (itself here)."""
        return bucket

    def _sequence_numbers(self, partition: bytes, bucket: int, rows: int) -> npt.NDArray[np.int64]:
        """The next ``rows`` sequence numbers of (``partition``, ``bucket``) (restored at first)."""
        with self._restore_lock:
            if self._sequences is None:
                self._sequences = {k: v + 1 for k, v in self._restore().items()}
            start = self._sequences.get((partition, bucket), 0)
            self._sequences[(partition, bucket)] = start + rows
        return np.arange(start, start + rows, dtype=np.int64)

    def _write_level0_runs(self, pending: PendingBucket, data: pa.Table) -> None:
        """Sort ``data`` by key, fold equal keys, write one level-0 sorted run (and changelog)."""
        ordered = sort_key_value(
            data,
            self.spec.key_names,
            sequence_fields=self.spec.sequence_fields,
            sequence_descending=self.spec.sequence_descending,
        )
        changelog: list[DataFileMeta] = []
        if self._input_changelog:  # the rows as written, in merge order (Paimon's raw consumer)
            changelog = self._write_level0(pending, ordered, changelog=True)
        try:
            files = self._write_level0(pending, merge_sorted(ordered, self.spec), changelog=False)
        except BaseException:
            self.file_io.delete_many(
                [self.paths.data_file_path(pending.partition_path, pending.bucket, f.file_name)
                 for f in changelog]
            )  # fmt: skip
            raise
        pending.changelog_files.extend(changelog)
        pending.files.extend(files)

    def _write_level0_many(self, items: Sequence[tuple[PendingBucket, pa.Table]]) -> None:
        """Write one level-0 sorted run per bucket of ``items``, sharing the vectorised work.

        The buckets' rows are sorted and folded in one pass (runs never mix),
        small runs get their stats from one aggregation over all of them, and
        the files are encoded in threads (pyarrow releases the GIL): per
        bucket only the file itself costs. The files and their metadata are
        those :meth:`_write_level0_runs` writes bucket by bucket (which this
        falls back to for input changelogs, mismatched schemas and writers
        whose flush does not sort, see :attr:`_FLUSH_SORTS`).
        """
        tables = [rows for _, rows in items]
        if not self._FLUSH_SORTS or self._input_changelog or len({t.schema for t in tables}) > 1:
            _in_threads([partial(self._write_level0_runs, p, rows) for p, rows in items])
            return
        sizes = np.array([t.num_rows for t in tables], dtype=np.int64)
        runs = np.repeat(np.arange(len(tables), dtype=np.int64), sizes)
        ordered = sort_key_value(
            pa.concat_tables(tables),
            self.spec.key_names,
            sequence_fields=self.spec.sequence_fields,
            sequence_descending=self.spec.sequence_descending,
            runs=runs,
        )
        merged, merged_runs = merge_sorted_runs(ordered, self.spec, runs)
        assert merged_runs is not None
        counts = np.bincount(merged_runs, minlength=len(tables))
        writers = [self._level0_writer(p, small=int(n) < SMALL_FILE_ROWS, changelog=False)
                   for (p, _), n in zip(items, counts.tolist(), strict=True)]  # fmt: skip
        merged = writers[0].conform(merged)
        offsets = np.concatenate(([0], np.cumsum(counts))).tolist()
        slices = [merged.slice(offsets[i], int(counts[i])) for i in range(len(items))]
        filled = [i for i in range(len(items)) if counts[i] > 0]
        summaries: dict[int, FileSummary] = {}
        if filled and (
            writers[0].fits_one_file(merged)  # then so does every slice of it
            or all(writers[i].fits_one_file(slices[i]) for i in filled)
        ):
            found = writers[0].file_summaries(merged, counts[filled].tolist())
            summaries = dict(zip(filled, found, strict=True))

        def write(i: int) -> None:
            pending, writer = items[i][0], writers[i]
            if i in summaries:
                writer.write_file(slices[i], summaries[i])
            else:
                _feed(writer, slices[i])
            pending.files.extend(w.meta for w in writer.written)

        _in_threads([partial(write, i) for i in filled])

    def _level0_writer(
        self, pending: PendingBucket, *, small: bool, changelog: bool
    ) -> KeyValueFileWriter:
        """A writer of ``pending``'s level-0 data (or changelog) files."""
        return KeyValueFileWriter(
            file_io=self.file_io,
            paths=self.paths,
            schema=self.schema,
            partition_path=pending.partition_path,
            bucket=pending.bucket,
            level=0,
            file_source=FileSource.APPEND,
            target_file_size=self._target,
            small=small,
            changelog=changelog,
        )

    def _write_level0(
        self, pending: PendingBucket, rows: pa.Table, *, changelog: bool
    ) -> list[DataFileMeta]:
        """Write key-sorted ``rows`` as level-0 data (or changelog) files of ``pending``."""
        writer = self._level0_writer(
            pending, small=rows.num_rows < SMALL_FILE_ROWS, changelog=changelog
        )
        return [w.meta for w in _feed(writer, rows)]


def _feed(writer: KeyValueFileWriter, rows: pa.Table) -> list[WrittenFile]:
    """Write key-sorted ``rows`` through ``writer`` (in 64Ki-row batches) and close it.

    Raises:
        BaseException: what writing raised, after the writer deleted its files.
    """
    try:
        for batch in rows.to_batches(max_chunksize=65_536):
            writer.write(pa.Table.from_batches([batch], schema=rows.schema))
        return writer.close()
    except BaseException:
        writer.abort()
        raise


_encode_pool: ThreadPoolExecutor | None = None
_encode_pool_lock = threading.Lock()


def _encoders() -> ThreadPoolExecutor:
    """The process's file-encoding threads, started once (not per flush)."""
    global _encode_pool
    with _encode_pool_lock:
        if _encode_pool is None:
            _encode_pool = ThreadPoolExecutor(
                max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="snaplake-encode"
            )
        return _encode_pool


def _forget_encoders() -> None:
    global _encode_pool
    _encode_pool = None


os.register_at_fork(after_in_child=_forget_encoders)


def _in_threads(tasks: Sequence[Callable[[], None]]) -> None:
    """Run ``tasks`` in threads (pyarrow encodes without the GIL); every one runs to its end.

    The tasks must not wait for other tasks of the pool (none here does).

    Raises:
        BaseException: the first task's error, after all have finished.
    """
    if len(tasks) <= 1:
        for task in tasks:
            task()
        return
    pool = _encoders()
    futures = [pool.submit(task) for task in tasks]
    wait(futures)
    for future in futures:
        future.result()


def dropped_row_kinds(options: CoreOptions) -> frozenset[int]:
    """The ``_VALUE_KIND`` bytes a writer drops before writing (``-U`` = 1, ``-D`` = 3).

    ``ignore-delete`` drops ``-U`` and ``-D``; ``ignore-update-before`` drops ``-U``.

    Source: Paimon ``RowKindFilter``.
    """
    if options.ignore_delete:
        return frozenset({1, 3})
    if options.ignore_update_before:
        return frozenset({1})
    return frozenset()


def restore_max_sequences(scan: FileStoreScan) -> dict[tuple[bytes, int], int]:
    """``{(partition, bucket): largest _MAX_SEQUENCE_NUMBER}`` over a snapshot's live files.

    Args:
        scan: A scan of the snapshot to restore from (no filters).

    Source: Paimon ``AbstractFileStoreWrite`` (``getMaxSequenceNumber(restoreFiles)``).
    """
    out: dict[tuple[bytes, int], int] = {}
    for e in scan.plan_entries():
        key = (e.partition, e.bucket)
        out[key] = max(out.get(key, -1), e.file.max_sequence_number)
    return out
