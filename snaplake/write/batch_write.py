"""One batch in one call: write, prepare, commit, or delete the files again.

:func:`write_and_commit` is what ``Table.write`` runs; :func:`commit_or_abort`
is the commit step it shares with the Spark batch write and sink: commit the
prepared messages, and delete their files when the commit surely failed.

Source: delta-rs ``write_deltalake`` and pyiceberg ``Table.append`` (one call
writes and commits), Paimon ``BatchWriteBuilder`` (``newWrite`` /
``newCommit``, abort on failure).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import pyarrow as pa

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage
from snaplake.commit.result import CommitResult
from snaplake.errors import CommitStateUnknownError, SchemaMismatchError
from snaplake.store.format.schema import TableSchema
from snaplake.write.table_write import RowKinds, TableWrite, abort_messages

__all__ = ["ArrowData", "commit_or_abort", "new_commit_user", "write_and_commit"]

logger = logging.getLogger(__name__)

ArrowData: TypeAlias = (
    pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.Table | pa.RecordBatch]
)
"""Rows for a one-call write: a table, a batch, a reader, or an iterable of tables/batches."""


def new_commit_user() -> str:
    """A fresh, unique commit user (``write-<uuid4>``) for a one-off write."""
    return f"write-{uuid.uuid4()}"


def write_and_commit(
    write: TableWrite,
    commit: FileStoreCommit,
    data: ArrowData,
    *,
    row_kinds: RowKinds | None = None,
    commit_identifier: int | None = None,
    overwrite: Mapping[str, Any] | bool | None = None,
) -> CommitResult:
    """Write ``data`` with ``write``, prepare, and commit it with ``commit`` as one snapshot.

    Before the commit point every failure deletes the data files written so
    far (then re-raises); after it, see :func:`commit_or_abort`. ``write`` is
    closed at the end.

    Args:
        write: A new writer (``FileStore.new_write``).
        commit: The committer of the same commit user.
        data: Rows whose columns match the table by name (see
            :func:`~snaplake.write.table_write.conform_to_schema`): a
            ``pa.Table``, a ``pa.RecordBatch``, a ``pa.RecordBatchReader`` or
            an iterable (list, generator) of tables and batches, written in
            order.
        row_kinds: One kind per row of ``data`` (over all its batches), or
            ``None`` = all ``+I``. Append tables take only ``+I``.
        commit_identifier: See ``FileStoreCommit.commit``.
        overwrite: See ``FileStoreCommit.commit``.

    Returns:
        The commit result.

    Raises:
        TypeError: ``data`` is none of the accepted types.
        SchemaMismatchError: the data does not fit the table, or ``row_kinds``
            has another length than ``data`` (files deleted).
        CommitError: see :func:`commit_or_abort`.
        Exception: whatever the writer raised (see ``TableWrite``); its files
            were deleted.

    Storage: writes data files and one commit; deletes the data files again
    when the write or the commit (surely) failed.
    """
    if overwrite is not None and overwrite is not False:
        write.ignore_previous_files()
    try:
        rows = 0
        kinds = None if row_kinds is None else _as_arrow(row_kinds)
        for chunk in _chunks(data):
            chunk_kinds = None
            if kinds is not None:
                if rows + chunk.num_rows > len(kinds):
                    raise SchemaMismatchError(
                        f"{len(kinds)} row kinds for more rows; pass one per row of data"
                    )
                chunk_kinds = kinds.slice(rows, chunk.num_rows)
            write.write_arrow(chunk, row_kinds=chunk_kinds)
            rows += chunk.num_rows
        if kinds is not None and len(kinds) != rows:
            raise SchemaMismatchError(f"{len(kinds)} row kinds for {rows} rows; pass one per row")
        messages = write.prepare_commit()
    except BaseException:
        try:
            write.abort()  # the files rolled so far; a failed flush deleted its own already
        except Exception:  # the write's own error is the one to report; orphan clean remains
            logger.warning("could not delete the data files of a failed write", exc_info=True)
        raise
    finally:
        write.close()
    return commit_or_abort(
        commit,
        write.schema,
        messages,
        commit_identifier=commit_identifier,
        overwrite=overwrite,
    )


def _as_arrow(kinds: RowKinds) -> pa.Array | pa.ChunkedArray:
    """``kinds`` as an Arrow array (sliced per batch; checked by the writer)."""
    if isinstance(kinds, pa.Array | pa.ChunkedArray):
        return kinds
    try:
        return pa.array(kinds)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(
            f"row_kinds must be '+I' '-U' '+U' '-D' strings or integers 0..3 ({exc})"
        ) from exc


def _chunks(data: ArrowData) -> Iterator[pa.Table | pa.RecordBatch]:
    """The tables and batches of ``data``, in order.

    Raises:
        TypeError: ``data`` is not a table, batch, reader, list, tuple or iterator.
    """
    if isinstance(data, pa.Table | pa.RecordBatch):
        yield data
    elif isinstance(data, pa.RecordBatchReader | list | tuple | Iterator):
        yield from data
    else:
        raise TypeError(
            "expected a pyarrow.Table, RecordBatch, RecordBatchReader or an iterable of "
            f"tables/batches, got {type(data).__name__}; build one with pa.table({{...}}), "
            "pa.Table.from_pylist(rows) or pa.Table.from_pandas(df)"
        )


def commit_or_abort(
    commit: FileStoreCommit,
    schema: TableSchema,
    messages: Sequence[CommitMessage],
    *,
    commit_identifier: int | None,
    overwrite: Mapping[str, Any] | bool | None = None,
) -> CommitResult:
    """Commit ``messages`` with ``commit``; delete their files if the commit surely failed.

    A ``CommitStateUnknownError`` deletes nothing (the snapshot may exist),
    nor does ``KeyboardInterrupt`` / ``SystemExit`` (they may come after the
    publish). Any other error re-reads the table first: if the identifier
    landed after all, nothing is deleted. A duplicate result (someone
    committed the same identifier meanwhile) has already deleted this
    attempt's redundant files (``FileStoreCommit.commit`` keeps those a
    snapshot references).

    Args:
        commit: The committer of the messages' commit user.
        schema: The schema the files were written with (for their paths).
        messages: Prepared messages (``TableWrite.prepare_commit``).
        commit_identifier: See ``FileStoreCommit.commit`` (``None`` = a
            one-off batch commit, never a duplicate).
        overwrite: See ``FileStoreCommit.commit``.

    A writer that compacted its level-0 files before the commit (first-row,
    deletion-vector and ``lookup`` changelog tables) publishes them as an
    APPEND then a COMPACT snapshot (``FileStoreCommit.commit``); when the
    COMPACT one loses, only the compaction's outputs are deleted and the
    APPEND result is returned.

    Returns:
        The commit result (``was_duplicate`` when the identifier had landed).

    Raises:
        CommitError: whatever ``FileStoreCommit.commit`` raised; the files
            are gone unless it was ``CommitStateUnknownError``.
        SchemaMismatchError: an overwrite's files lie outside its spec (files
            deleted).

    Storage:
        One commit (see ``FileStoreCommit.commit``, which also cleans up a
        duplicate's files); on failure, deletes the messages' data files.
    """
    try:
        return commit.commit(messages, commit_identifier=commit_identifier, overwrite=overwrite)
    except CommitStateUnknownError:
        logger.warning(
            "commit of %s to %s has an unknown outcome; its files are kept",
            commit_identifier,
            commit.table_name,
        )
        raise
    except Exception:
        if not _landed(commit, commit_identifier):
            _abort_quietly(commit, schema, messages)
        raise


def _landed(commit: FileStoreCommit, commit_identifier: int | None) -> bool:
    """True when ``commit_identifier`` is recorded for the committer's user (or unknowable)."""
    if commit_identifier is None:
        return False
    try:
        last = commit.txn_map(commit.snapshot_commit.latest_snapshot()).get(commit.commit_user)
    except Exception:  # cannot tell: keep the files (orphan clean removes them)
        logger.warning(
            "could not re-read %s after a failed commit", commit.table_name, exc_info=True
        )
        return True
    return last is not None and last >= commit_identifier


def _abort_quietly(
    commit: FileStoreCommit, schema: TableSchema, messages: Sequence[CommitMessage]
) -> None:
    """Delete the data files of uncommitted ``messages`` (best effort, logged)."""
    if not messages:
        return
    try:
        abort_messages(commit.file_io, commit.paths, schema, messages)
        logger.info("deleted the files of %d uncommitted message(s)", len(messages))
    except Exception:  # cleanup must not hide the original error
        logger.warning("could not delete the files of %d message(s)", len(messages), exc_info=True)
