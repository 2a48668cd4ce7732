"""Merge functions of the four merge engines, vectorised over chunks of key groups.

A chunk is a key/value table sorted into merge order
(:func:`~snaplake.mergetree.groups.sort_key_value`). :func:`merge_sorted`
folds every group of equal keys into one row: a group of one version is
passed through unchanged, kind included (Paimon's
``ReducerMergeFunctionWrapper``); groups of several versions go to the
engine's :meth:`MergeFunction.merge`, which works on whole columns (row
indices per group, NumPy ``reduceat``, Arrow grouped aggregation), never
row by row in Python.

Source: Paimon ``DeduplicateMergeFunction``, ``FirstRowMergeFunction``,
``PartialUpdateMergeFunction`` (without sequence groups),
``AggregateMergeFunction``, ``ReducerMergeFunctionWrapper``,
``LookupMergeFunction``, ``DropDeleteReader``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import MergeFunctionError
from snaplake.mergetree.aggregate import aggregate_column
from snaplake.mergetree.groups import Groups, group_starts, sort_key_value, take_or_null
from snaplake.mergetree.kv import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, RowKind, is_retract
from snaplake.options import CoreOptions
from snaplake.options.config_option import parse_bool
from snaplake.store.format.primary_key import MergeEngine, aggregate_functions
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.types import DataType

__all__ = [
    "AggregateMergeFunction",
    "DeduplicateMergeFunction",
    "FirstRowMergeFunction",
    "LEVEL_COLUMN",
    "MergeFunction",
    "MergeSpec",
    "PartialUpdateMergeFunction",
    "drop_retracts",
    "fold",
    "force_lookup",
    "merge_function_for",
    "merge_sorted",
    "merge_sorted_runs",
    "need_lookup",
    "pick_high_level",
]

LEVEL_COLUMN = "_LEVEL"
"""Column holding each row's file level (int32): the lookup rule reads it when present."""


def _kinds(chunk: pa.Table) -> npt.NDArray[np.int8]:
    return np.asarray(chunk.column(VALUE_KIND).to_numpy(), dtype=np.int8)


class MergeFunction(ABC):
    """Folds groups of two or more versions of a key into one row each.

    Subclasses implement :meth:`merge`; use :func:`merge_sorted` to apply one
    to a sorted chunk.
    """

    engine: MergeEngine

    @abstractmethod
    def merge(
        self, chunk: pa.Table, groups: Groups
    ) -> tuple[pa.Table, npt.NDArray[np.bool_] | None]:
        """Fold each group of ``chunk`` (every group has at least two rows).

        Args:
            chunk: Sorted key/value rows (all columns of one layout).
            groups: The groups of equal keys.

        Returns:
            One row per group, with ``chunk``'s schema, and a mask of the
            groups that produce a row (``None`` = all).

        Raises:
            MergeFunctionError: the engine rejects a group (e.g. a retraction
                a first-row table cannot take).
        """


@dataclass(frozen=True, slots=True)
class DeduplicateMergeFunction(MergeFunction):
    """The last version wins, its kind included (``DeduplicateMergeFunction``).

    Attributes:
        ignore_delete: Skip retractions (``ignore-delete``).
    """

    ignore_delete: bool = False
    engine = MergeEngine.DEDUPLICATE

    def merge(
        self, chunk: pa.Table, groups: Groups
    ) -> tuple[pa.Table, npt.NDArray[np.bool_] | None]:
        """See :meth:`MergeFunction.merge`."""
        if not self.ignore_delete:
            return chunk.take(pa.array(groups.ends - 1)), None
        idx = groups.last_where(~is_retract(_kinds(chunk)))
        keep = idx >= 0
        return chunk.take(pa.array(idx[keep])), keep


@dataclass(frozen=True, slots=True)
class FirstRowMergeFunction(MergeFunction):
    """The first version wins (``FirstRowMergeFunction``).

    Attributes:
        ignore_delete: Skip retractions; without it a retraction is an error.
    """

    ignore_delete: bool = False
    engine = MergeEngine.FIRST_ROW

    def merge(
        self, chunk: pa.Table, groups: Groups
    ) -> tuple[pa.Table, npt.NDArray[np.bool_] | None]:
        """See :meth:`MergeFunction.merge`."""
        retract = is_retract(_kinds(chunk))
        if retract.any() and not self.ignore_delete:
            raise MergeFunctionError(
                "the first-row merge engine cannot take -U/-D rows; set 'ignore-delete' = "
                "'true' to ignore them"
            )
        idx = groups.first_where(~retract)
        keep = idx >= 0
        return chunk.take(pa.array(idx[keep])), keep


@dataclass(frozen=True, slots=True)
class PartialUpdateMergeFunction(MergeFunction):
    """Per column the last non-null value (``PartialUpdateMergeFunction``, no sequence groups).

    Attributes:
        ignore_delete: Skip retractions (the first version still seeds the row).
        remove_record_on_delete: A ``-D`` resets the row to its own values
            (``partial-update.remove-record-on-delete``). As in Paimon, a group
            with a later ``+I``/``+U`` after the ``-D`` folds into ``+I``: a
            compaction below the top level that merges them therefore loses
            the reset, and older levels fill the nulls at the next merge
            (docs/primary-key-tables.md §5).
    """

    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    engine = MergeEngine.PARTIAL_UPDATE

    def merge(
        self, chunk: pa.Table, groups: Groups
    ) -> tuple[pa.Table, npt.NDArray[np.bool_] | None]:
        """See :meth:`MergeFunction.merge`."""
        kinds = _kinds(chunk)
        retract = is_retract(kinds)
        if retract.any() and not (self.ignore_delete or self.remove_record_on_delete):
            raise MergeFunctionError(
                "the partial-update merge engine cannot take -U/-D rows by default; set "
                "'ignore-delete' or 'partial-update.remove-record-on-delete' to 'true'"
            )
        ends = groups.ends
        start = groups.starts
        if self.remove_record_on_delete:
            last_delete = groups.last_where(kinds == RowKind.DELETE)
            start = np.where(last_delete >= 0, last_delete, groups.starts)
        # The row the merge starts from: a retraction's values seed it (initRow).
        base = np.where(retract[start], start, -1)
        eligible = ~retract & (groups.rows >= start[groups.gid])
        any_add = groups.any(~retract)
        if self.remove_record_on_delete:
            delete = (kinds[ends - 1] == RowKind.DELETE) | ~any_add
        else:
            delete = ~any_add
        kind_out = np.where(delete, RowKind.DELETE, RowKind.INSERT).astype(np.int8)
        seq = np.asarray(chunk.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64)
        if self.ignore_delete:
            latest = groups.last_where(~retract)
            seq_out = np.where(latest >= 0, seq[np.maximum(latest, 0)], 0)
        else:
            seq_out = seq[ends - 1]
        last = pa.array(ends - 1)
        columns: list[pa.Array] = []
        for name in chunk.column_names:
            col = chunk.column(name)
            if name == SEQUENCE_NUMBER:
                columns.append(pa.array(seq_out, type=pa.int64()))
            elif name == VALUE_KIND:
                columns.append(pa.array(kind_out, type=pa.int8()))
            elif name.startswith(KEY_FIELD_PREFIX):
                columns.append(col.take(last).combine_chunks())
            else:
                valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
                idx = groups.last_where(eligible & valid)
                columns.append(take_or_null(col, np.where(idx >= 0, idx, base)))
        return pa.Table.from_arrays(columns, schema=chunk.schema), None


@dataclass(frozen=True, slots=True)
class AggregateMergeFunction(MergeFunction):
    """Per column the table's aggregate function (``AggregateMergeFunction``).

    Attributes:
        functions: Column -> function (see
            :func:`~snaplake.store.format.primary_key.aggregate_functions`).
        types: Column -> Paimon type.
        ignore_retract: Columns with ``fields.<f>.ignore-retract = true``.
        delimiters: ``listagg`` column -> delimiter.
    """

    functions: dict[str, str]
    types: dict[str, DataType]
    ignore_retract: frozenset[str] = frozenset()
    delimiters: dict[str, str] | None = None
    engine = MergeEngine.AGGREGATION

    def merge(
        self, chunk: pa.Table, groups: Groups
    ) -> tuple[pa.Table, npt.NDArray[np.bool_] | None]:
        """See :meth:`MergeFunction.merge`."""
        retract = is_retract(_kinds(chunk))
        last = pa.array(groups.ends - 1)
        columns: list[pa.Array] = []
        for name in chunk.column_names:
            col = chunk.column(name)
            if name == VALUE_KIND:
                columns.append(pa.array(np.zeros(len(groups), dtype=np.int8), type=pa.int8()))
            elif (
                name == SEQUENCE_NUMBER
                or name.startswith(KEY_FIELD_PREFIX)
                or name not in self.functions  # a reader's own column (``_LEVEL``): the newest
            ):
                columns.append(col.take(last).combine_chunks())
            else:
                columns.append(
                    aggregate_column(
                        self.functions[name],
                        col,
                        self.types[name],
                        groups,
                        retract,
                        ignore_retract=name in self.ignore_retract,
                        delimiter=(self.delimiters or {}).get(name, ","),
                        name=name,
                    )
                )
        return pa.Table.from_arrays(columns, schema=chunk.schema), None


@dataclass(frozen=True, slots=True)
class MergeSpec:
    """How versions of a key are ordered and folded for one table.

    Attributes:
        key_names: Trimmed primary-key columns.
        sequence_fields: ``sequence.field`` columns (read whenever rows merge).
        sequence_descending: ``sequence.field.sort-order = descending``.
        function: The engine's merge function.
        lookup: Apply Paimon's ``LookupMergeFunction`` rule before ``function``
            (:func:`pick_high_level`) to chunks carrying :data:`LEVEL_COLUMN`.
    """

    key_names: tuple[str, ...]
    sequence_fields: tuple[str, ...]
    sequence_descending: bool
    function: MergeFunction
    lookup: bool = False


def need_lookup(options: CoreOptions) -> bool:
    """Whether a primary-key table's options make Paimon compact (and merge) it with lookup.

    ``changelog-producer = lookup``, ``deletion-vectors.enabled``,
    ``merge-engine = first-row`` or ``force-lookup``.

    Source: Paimon ``LookupStrategy`` (``needLookup``), ``CoreOptions.lookupStrategy``.
    """
    return (
        options.changelog_producer == "lookup"
        or options.deletion_vectors_enabled
        or options.merge_engine == MergeEngine.FIRST_ROW
        or force_lookup(options)
    )


def force_lookup(options: CoreOptions) -> bool:
    """``force-lookup``: compact with lookup (and wait for it at commit) without changelog.

    Source: Paimon ``CoreOptions.FORCE_LOOKUP``, ``LookupStrategy``.
    """
    return parse_bool(options.raw.get("force-lookup", "false"))


def pick_high_level(
    levels: npt.NDArray[np.int32], starts: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """The rows the lookup merge keeps: per key, level <= 0 rows and those of its lowest level > 0.

    A lookup compaction merges a key's older versions into the record it
    writes, so the newest higher-level record (lowest level above 0; a level
    holds a key once) stands for all higher ones. Paimon 0.9 picks the last
    level > 0 record in merge order; current Paimon the lowest level: the same
    record in a table only lookup compactions wrote.

    Args:
        levels: Each row's file level (level 0, or below for unwritten rows).
        starts: First row of each group of equal keys (ascending, from 0).

    Returns:
        A row mask (every group keeps at least one row).

    Source: Paimon ``LookupMergeFunction`` (``pickHighLevel``, ``getResult``).
    """
    high = levels > 0
    if not high.any():
        return np.ones(levels.size, dtype=np.bool_)
    sizes = np.diff(np.append(starts, levels.size))
    masked = np.where(high, levels, np.iinfo(np.int32).max).astype(np.int32)
    lowest = np.minimum.reduceat(masked, starts)
    keep: npt.NDArray[np.bool_] = ~high | (levels == np.repeat(lowest, sizes))
    return keep


def merge_function_for(schema: TableSchema) -> MergeSpec:
    """Build the merge spec of a primary-key table from its schema and options.

    Raises:
        InvalidOptionError: an unknown merge engine or aggregate function.
        UnsupportedTableError: an aggregate function snaplake does not implement.
    """
    opts = schema.core_options
    engine = MergeEngine(opts.merge_engine)
    function: MergeFunction
    if engine is MergeEngine.DEDUPLICATE:
        function = DeduplicateMergeFunction(ignore_delete=opts.ignore_delete)
    elif engine is MergeEngine.FIRST_ROW:
        function = FirstRowMergeFunction(ignore_delete=opts.ignore_delete)
    elif engine is MergeEngine.PARTIAL_UPDATE:
        function = PartialUpdateMergeFunction(
            ignore_delete=opts.ignore_delete,
            remove_record_on_delete=opts.partial_update_remove_record_on_delete,
        )
    else:
        types = schema.field_types
        functions = aggregate_functions(
            field_types=types, primary_keys=schema.primary_keys, options=schema.options
        )
        function = AggregateMergeFunction(
            functions=functions,
            types=types,
            ignore_retract=frozenset(n for n in types if opts.field_flag(n, "ignore-retract")),
            delimiters={
                n: opts.field_listagg_delimiter(n) for n, f in functions.items() if f == "listagg"
            },
        )
    return MergeSpec(
        key_names=schema.trimmed_primary_keys,
        sequence_fields=tuple(opts.sequence_field),
        sequence_descending=opts.sequence_field_descending,
        function=function,
        # LookupMergeFunction.wrap leaves first-row alone.
        lookup=engine is not MergeEngine.FIRST_ROW and need_lookup(opts),
    )


def merge_sorted(chunk: pa.Table, spec: MergeSpec) -> pa.Table:
    """Fold a chunk in merge order into one row per key (kinds kept, retractions included).

    Groups of one version pass through unchanged; the others go to
    ``spec.function``. Output rows stay in key order.

    Raises:
        MergeFunctionError: the engine rejects a group.
    """
    return merge_sorted_runs(chunk, spec, None)[0]


def merge_sorted_runs(
    chunk: pa.Table, spec: MergeSpec, runs: npt.NDArray[np.int64] | None
) -> tuple[pa.Table, npt.NDArray[np.int64] | None]:
    """:func:`merge_sorted` of several runs at once (see ``sort_key_value``'s ``runs``).

    Returns the folded rows and the run of each (``None`` when ``runs`` is).
    Keys never fold across runs. With ``spec.lookup`` and a
    :data:`LEVEL_COLUMN` in ``chunk``, each key first loses its level > 0 rows
    other than those of its lowest level > 0 (:func:`pick_high_level`).

    Raises:
        MergeFunctionError: the engine rejects a group.
    """
    n = chunk.num_rows
    if n <= 1:
        return chunk, runs
    starts = group_starts(chunk, spec.key_names, runs)
    if len(starts) == n:
        return chunk, runs
    if spec.lookup and LEVEL_COLUMN in chunk.column_names:
        levels = np.asarray(chunk.column(LEVEL_COLUMN).to_numpy(), dtype=np.int32)
        picked = pick_high_level(levels, starts)
        if not picked.all():
            chunk = chunk.filter(pa.array(picked))
            runs = None if runs is None else runs[picked]
            kept = np.add.reduceat(picked.astype(np.int64), starts)
            starts = np.concatenate(([0], np.cumsum(kept)[:-1])).astype(np.int64)
            n = chunk.num_rows
            if len(starts) == n:
                return chunk, runs
    all_groups = Groups(starts, n)
    multi = all_groups.sizes > 1
    row_multi = np.repeat(multi, all_groups.sizes)
    sub = chunk.filter(pa.array(row_multi))
    sub_sizes = all_groups.sizes[multi]
    sub_starts = np.concatenate(([0], np.cumsum(sub_sizes)[:-1])).astype(np.int64)
    merged, keep = spec.function.merge(sub, Groups(sub_starts, sub.num_rows))
    multi_ids = np.flatnonzero(multi)
    if keep is not None:
        multi_ids = multi_ids[keep]
    single_ids = np.flatnonzero(~multi)
    group_ids = np.sort(np.concatenate((single_ids, multi_ids)))
    out_runs = None if runs is None else runs[starts[group_ids]]
    if multi.all():
        return merged, out_runs
    singles = chunk.filter(pa.array(~row_multi))
    order = np.argsort(np.concatenate((single_ids, multi_ids)), kind="stable")
    combined = pa.concat_tables([singles, merged.cast(singles.schema)])
    return combined.take(pa.array(order)), out_runs


def fold(table: pa.Table, spec: MergeSpec) -> pa.Table:
    """Sort key/value rows into merge order and fold them (see :func:`merge_sorted`)."""
    ordered = sort_key_value(
        table,
        spec.key_names,
        sequence_fields=spec.sequence_fields,
        sequence_descending=spec.sequence_descending,
    )
    return merge_sorted(ordered, spec)


def drop_retracts(table: pa.Table) -> pa.Table:
    """Keep rows of kind ``+I``/``+U`` (``DropDeleteReader``)."""
    kinds = table.column(VALUE_KIND)
    if table.num_rows == 0:
        return table
    keep = pc.or_(pc.equal(kinds, RowKind.INSERT), pc.equal(kinds, RowKind.UPDATE_AFTER))
    if pc.all(keep).as_py():
        return table
    return table.filter(keep)
