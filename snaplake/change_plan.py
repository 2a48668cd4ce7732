"""The plan of a change read: splits per snapshot and (partition, bucket), and their reader.

:meth:`snaplake.table_changes.TableChanges.plan_changes` builds a
:class:`ChangePlan`; its :class:`ChangeSplit` s and :class:`ChangeReadTask`
are picklable, so Spark executors read the splits (``snaplake.spark.source``).
The modes are described in :mod:`snaplake.table_changes`.

Source: Paimon ``IncrementalDeltaStartingScanner`` / ``IncrementalDiffSplitRead``
(the splits), ``DataSplit`` of streaming reads.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import islice

import numpy as np
import pyarrow as pa

from snaplake.store.read.change_scan import CHANGELOG, DELTA, ROW_KIND, diff_tables
from snaplake.store.read.predicate import Predicate, and_expression
from snaplake.store.read.scan import Split
from snaplake.store.read.split_read import SplitsTask

__all__ = [
    "AUTO",
    "DIFF",
    "MODES",
    "ROW_KIND",
    "SNAPSHOT_ID",
    "ChangePlan",
    "ChangeReadTask",
    "ChangeSplit",
]

SNAPSHOT_ID = "_snapshot_id"
"""The column holding the snapshot a change row belongs to (int64)."""

DIFF = "diff"
AUTO = "auto"
READ_AHEAD = 4
"""Splits a change reader reads at once (threads), ahead of the consumer."""

MODES = (AUTO, DELTA, CHANGELOG, DIFF)
"""The modes of a change read (Paimon's ``incremental-between-scan-mode`` values)."""


@dataclass(frozen=True)
class ChangeSplit:
    """One snapshot's change files of one (partition, bucket); picklable.

    Attributes:
        snapshot_id: The snapshot the rows belong to (``diff``: the range's end).
        commit_kind: That snapshot's commit kind (``APPEND``, ``COMPACT``, ...).
        mode: ``delta``, ``changelog`` or ``diff``.
        split: The files to read (``diff``: the bucket's live files at the end).
        before: ``diff`` only: the bucket's live files at ``start - 1`` (``None``: none).
    """

    snapshot_id: int
    commit_kind: str
    mode: str
    split: Split
    before: Split | None = None

    @property
    def row_count(self) -> int:
        """Rows in the split's files (before any filter; ``diff``: both sides)."""
        return self.split.row_count + (self.before.row_count if self.before else 0)


@dataclass(frozen=True)
class ChangeReadTask:
    """Picklable: ``task(split)`` yields the change rows of one :class:`ChangeSplit`.

    Built by :meth:`TableChanges.plan_changes`; Spark executors call it.

    Attributes:
        schema: The Arrow schema of every yielded batch.
        columns: The projected table columns (the schema's first fields).
        needed: Columns read (the projection plus the filter's columns).
        predicates: The filter (AND), applied exactly to every row.
        read: The table kind's reader of ``delta`` / ``changelog`` splits.
        merged: ``diff``: the kind's merged reader of whole splits (all columns),
            its ``splits`` replaced by the side read.
        keys: ``diff``: the key columns within a bucket (empty: rows are compared whole).
    """

    schema: pa.Schema
    columns: tuple[str, ...]
    needed: tuple[str, ...]
    predicates: tuple[Predicate, ...]
    read: Callable[[Split], Iterator[pa.Table]]
    merged: SplitsTask | None = None
    keys: tuple[str, ...] = ()

    def __call__(self, split: ChangeSplit) -> Iterator[pa.RecordBatch]:
        """Yield ``split``'s rows as batches of :attr:`schema`, exactly filtered.

        Raises:
            FileNotFoundError: a file of the split is missing (expired meanwhile).
        """
        tables = self._diff(split) if split.mode == DIFF else self.read(split.split)
        expr = and_expression(self.predicates)
        for table in tables:
            if expr is not None:
                table = table.filter(expr)
            if not table.num_rows:
                continue
            ids = pa.array(np.full(table.num_rows, split.snapshot_id, dtype=np.int64))
            out = table.select([*self.columns, ROW_KIND]).append_column(SNAPSHOT_ID, ids)
            if out.schema.types == self.schema.types:  # only nullability differs
                out = pa.Table.from_arrays(out.columns, schema=self.schema)
            else:
                out = out.cast(self.schema)
            yield from out.to_batches()

    def _diff(self, split: ChangeSplit) -> Iterator[pa.Table]:
        assert self.merged is not None
        merged = self.merged

        def rows(s: Split | None) -> pa.Table | None:
            if s is None or not s.files:
                return None
            parts = list(replace(merged, splits=(s,))([0]))
            return pa.concat_tables(parts) if parts else None

        after, before = rows(split.split), rows(split.before)
        yield from diff_tables(before, after, keys=self.keys, columns=self.needed)


@dataclass(frozen=True)
class ChangePlan:
    """The planned change read of a snapshot range.

    Attributes:
        schema: The table's columns (or the projection), then ``_row_kind``
            (string) and ``_snapshot_id`` (int64).
        splits: The splits to read, in snapshot order.
        snapshot_ids: Every snapshot of the range, with rows or not.
        read_task: Picklable; ``read_task(split)`` yields batches of ``schema``.
        mode: The resolved mode (``delta``, ``changelog`` or ``diff``).
    """

    schema: pa.Schema
    splits: list[ChangeSplit]
    snapshot_ids: list[int]
    read_task: ChangeReadTask
    mode: str = DELTA

    def to_reader(self) -> pa.RecordBatchReader:
        """The rows of every split, in order, as one reader of :attr:`schema`.

        Up to :data:`READ_AHEAD` splits are read at once in threads (Arrow
        decodes without the GIL); batches come out in plan order.
        """
        return pa.RecordBatchReader.from_batches(self.schema, self._batches())

    def _batches(self) -> Iterator[pa.RecordBatch]:
        task = self.read_task
        if len(self.splits) < 2:
            for split in self.splits:
                yield from task(split)
            return
        with ThreadPoolExecutor(max_workers=READ_AHEAD) as pool:
            pending: deque[Future[list[pa.RecordBatch]]] = deque()
            splits = iter(self.splits)
            for split in islice(splits, READ_AHEAD):
                pending.append(pool.submit(lambda s: list(task(s)), split))
            while pending:
                batches = pending.popleft().result()
                for split in islice(splits, 1):
                    pending.append(pool.submit(lambda s: list(task(s)), split))
                yield from batches
