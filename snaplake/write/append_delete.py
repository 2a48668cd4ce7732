"""Deletes of an append table with deletion vectors: the matching rows marked in vectors.

:func:`plan_append_delete` reads the live files of a snapshot that may hold
matching rows (pruned by their value stats), each with its current vector
applied, finds the positions of the rows the filter matches and adds them to
the file's vector in its bucket's
:class:`~snaplake.write.deletion_files.DeletionFileMaintainer`.
:meth:`AppendDelete.write_messages` writes the changed vectors and returns one
CommitMessage per (partition, bucket) whose ``DataIncrement`` carries the new
DELETION_VECTORS files and the ones they replace; the commit is of kind
OVERWRITE with the deletion-vector conflict checks
(:mod:`snaplake.commit.dv_conflict`). No data file is written or deleted.

Source: Paimon Spark ``DeleteFromPaimonTableCommand`` (deletion-vector path),
``PaimonSparkWriter.persistDeletionVectors``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, DataIncrement
from snaplake.commit.result import CommitResult
from snaplake.errors import CommitConflictError, CommitStateUnknownError
from snaplake.options.registry import DELETION_VECTOR_INDEX_FILE_TARGET_SIZE
from snaplake.store.format.file_format import format_of_file
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX, IndexFileMeta
from snaplake.store.format.schema import TableSchema
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.read.predicate import Predicate, and_expression, resolve_projection
from snaplake.store.read.scan import FileStoreScan, Split
from snaplake.store.read.schema_evolution import SchemaEvolution
from snaplake.store.table_storage import TableStorage
from snaplake.write.deletion_files import DeletionFileMaintainer, delete_index_files

__all__ = ["MAX_DELETE_PLANS", "AppendDelete", "commit_append_delete", "plan_append_delete"]

logger = logging.getLogger(__name__)

_POSITION = "_SNAPLAKE_ROW_POSITION"


@dataclass(slots=True)
class AppendDelete:
    """A planned delete: the rows it removes, per bucket, not yet written.

    Attributes:
        snapshot_id: The snapshot planned on (``None``: an empty table).
        rows: Rows the delete removes (not counting rows deleted before).
        files: Data files (names) with rows to delete, sorted.
        buckets: ``(partition, bucket, total_buckets, maintainer)`` of each bucket
            with rows to delete.
    """

    snapshot_id: int | None
    rows: int = 0
    files: tuple[str, ...] = ()
    buckets: list[tuple[bytes, int, int, DeletionFileMaintainer]] = field(default_factory=list)

    def write_messages(self) -> list[CommitMessage]:
        """Write each bucket's changed vectors; one message per bucket.

        Raises:
            StorageError: a write failed (the index files written are deleted).

        Storage: creates DELETION_VECTORS index files (see
        :meth:`DeletionFileMaintainer.persist`).
        """
        messages: list[CommitMessage] = []
        try:
            for partition, bucket, total, maintainer in self.buckets:
                new, replaced = maintainer.persist()
                messages.append(
                    CommitMessage(
                        partition=partition,
                        bucket=bucket,
                        total_buckets=total,
                        data_increment=DataIncrement(
                            new_index_files=new, deleted_index_files=replaced
                        ),
                    )
                )
        except BaseException:
            if self.buckets:
                m = self.buckets[0][3]
                delete_index_files(
                    m.file_io, m.paths, [f for x in messages for f in x.added_index_files()]
                )
            raise
        return messages


def plan_append_delete(
    table: TableStorage,
    scan: FileStoreScan,
    pruned: FileStoreScan,
    *,
    schema: TableSchema,
    predicates: Sequence[Predicate],
    bucketed: bool,
) -> AppendDelete:
    """Find the rows of ``scan``'s snapshot that ``predicates`` match, in new vectors.

    Args:
        table: The table's storage.
        scan: A scan of every live file of the snapshot (no filter).
        pruned: The same snapshot's scan with ``predicates`` (stats pruning).
        schema: The read schema (the latest).
        predicates: The AND of the delete's filter (non-empty).
        bucketed: The table has fixed buckets (one vector file per bucket).

    Raises:
        SchemaMismatchError: a filter column is unknown, or a literal does not fit
            its column (before any data file is read).
        FileNotFoundError: a data or index file is missing.
        CorruptMetadataError: an index file is damaged.

    Storage: reads the snapshot's manifests, index manifest, the vector files of
    the buckets with candidate files and the filter columns of the candidates.
    """
    _, needed = resolve_projection(schema.arrow_schema, [], predicates)
    snapshot = scan.snapshot
    plan = AppendDelete(snapshot_id=snapshot.id if snapshot is not None else None)
    if snapshot is None:
        return plan
    candidates = {(e.partition, e.bucket, e.file.file_name) for e in pruned.plan_entries()}
    if not candidates:
        return plan
    index: dict[tuple[bytes, int], list[IndexFileMeta]] = {}
    for e in read_index_entries(table, snapshot, index_type=DELETION_VECTORS_INDEX):
        index.setdefault((e.partition, e.bucket), []).append(e.index_file)
    options = schema.core_options
    evolution = SchemaEvolution(schema, table.schema_manager.schema)
    expr = and_expression(predicates)
    files: list[str] = []
    for split in scan.plan():
        chosen = [
            i
            for i, f in enumerate(split.files)
            if (split.partition, split.bucket, f.file_name) in candidates
        ]
        if not chosen:
            continue
        maintainer = DeletionFileMaintainer(
            file_io=table.file_io, paths=table.paths,
            index_files=index.get((split.partition, split.bucket), ()),
            live_files={f.file_name for f in split.files}, bucketed=bucketed,
            target_size=options.get(DELETION_VECTOR_INDEX_FILE_TARGET_SIZE) or 2 << 20,
            bitmap64=options.deletion_vectors_bitmap64,
        )  # fmt: skip
        rows = 0
        for i in chosen:
            positions = _matching_positions(table, split, i, evolution, needed, expr)
            added = maintainer.delete_positions(split.files[i].file_name, positions)
            if added:
                rows += added
                files.append(split.files[i].file_name)
        if rows:
            plan.rows += rows
            plan.buckets.append((split.partition, split.bucket, split.total_buckets, maintainer))
    plan.files = tuple(sorted(files))
    return plan


def _matching_positions(
    table: TableStorage,
    split: Split,
    i: int,
    evolution: SchemaEvolution,
    needed: Sequence[str],
    expr: object,
) -> np.ndarray:
    """0-based positions of the rows of ``split.files[i]`` the filter matches (NULL: no)."""
    meta, path = split.files[i], split.paths[i]
    mapping = evolution.mapping(meta.schema_id, needed)
    with table.file_io.open_input(path) as f:
        data = format_of_file(path).read(f, mapping.file_arrow_schema)
    data = mapping.apply(data)
    data = data.append_column(_POSITION, pa.array(np.arange(data.num_rows, dtype=np.int64)))
    found = data.filter(expr).column(_POSITION)
    return np.asarray(found.to_numpy(), dtype=np.int64)


MAX_DELETE_PLANS = 3
"""Plans :func:`commit_append_delete` tries when a concurrent commit conflicts."""


def commit_append_delete(
    plan: Callable[[], AppendDelete], commit: FileStoreCommit, *, max_plans: int = MAX_DELETE_PLANS
) -> CommitResult:
    """Plan, write and commit a delete; plan again when a concurrent commit conflicts.

    A compaction or overwrite that rewrote a file the delete marks, or another
    delete that changed its vectors, makes the commit raise
    ``CommitConflictError``: the new index files are deleted and the delete is
    planned again on the latest snapshot (re-reading the files), up to
    ``max_plans`` plans in all. Appends never conflict (their files are new).

    Args:
        plan: Plans the delete on the latest snapshot (:func:`plan_append_delete`).
        commit: The committer (its snapshot is of kind OVERWRITE, as Paimon's).
        max_plans: Plans tried in all.

    Returns:
        The commit result (nothing matched: no snapshot, ``snapshot_id`` the latest).

    Raises:
        CommitConflictError: every plan lost to a concurrent commit.
        CommitRetriesExhaustedError, CommitStateUnknownError: as ``FileStoreCommit.commit``.

    Storage: per plan, new DELETION_VECTORS files and one commit; a surely failed
    commit deletes those files again.
    """
    for attempt in range(1, max_plans + 1):
        planned = plan()
        messages = planned.write_messages()
        try:
            return commit.commit(messages)
        except CommitStateUnknownError:
            raise  # the snapshot may reference them
        except CommitConflictError:
            delete_index_files(
                commit.file_io, commit.paths, [f for m in messages for f in m.added_index_files()]
            )
            if attempt == max_plans:
                raise
            logger.info("delete from %s lost a race; planning again", commit.table_name)
        except Exception:
            delete_index_files(
                commit.file_io, commit.paths, [f for m in messages for f in m.added_index_files()]
            )
            raise
    raise AssertionError("unreachable")
