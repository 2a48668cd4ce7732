"""Reading a primary-key table's change files without merging (each row with its kind).

A streaming split of a primary-key table (the files one snapshot added, or
its changelog files) is read file by file, in sequence order, with no key
merge: every row keeps its own ``_VALUE_KIND`` (``+I`` ``-U`` ``+U`` ``-D``).

Source: Paimon ``MergeFileSplitRead.createNoMergeReader`` (streaming splits),
``KeyValueTableRead`` (``_VALUE_KIND`` becomes the row kind).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from snaplake.mergetree.kv import VALUE_KIND, RowKind
from snaplake.mergetree.read import read_context
from snaplake.store.format.schema import TableSchema
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.change_scan import ROW_KIND
from snaplake.store.read.scan import Split

__all__ = ["KeyValueChangeRead", "row_kind_strings"]

_KINDS = pa.array([k.short_string for k in sorted(RowKind)], type=pa.string())


def row_kind_strings(kinds: pa.ChunkedArray | pa.Array) -> pa.Array:
    """``_VALUE_KIND`` bytes (0..3) as Paimon's short strings (``+I`` ``-U`` ``+U`` ``-D``)."""
    indices = pc.cast(kinds, pa.int32())
    if isinstance(indices, pa.ChunkedArray):
        indices = indices.combine_chunks()
    return pc.take(_KINDS, indices)


@dataclass(frozen=True, slots=True)
class KeyValueChangeRead:
    """Picklable: read one split of a primary-key table without merging.

    Attributes:
        file_io: Storage of the table.
        schema: The read schema (files of other schemas are mapped by field id).
        schemas: The schema of every ``_SCHEMA_ID`` the splits' files carry.
        columns: Value columns to return (then :data:`ROW_KIND`).

    Source: Paimon ``MergeFileSplitRead.createNoMergeReader``.
    """

    file_io: FileIO
    schema: TableSchema
    schemas: Mapping[int, TableSchema]
    columns: tuple[str, ...]

    def __call__(self, split: Split) -> Iterator[pa.Table]:
        """Yield the rows of ``split``'s files, file by file, each with its row kind.

        Raises:
            FileNotFoundError: a data file is missing.
            SchemaMismatchError: a file's schema has no column for a key.
        """
        ctx = read_context(self.file_io, self.schema, self.schemas.__getitem__)
        full = ctx.kv_schema(list(self.columns))
        read = pa.schema([full.field(VALUE_KIND), *(full.field(n) for n in self.columns)])
        for file, path in zip(split.files, split.paths, strict=True):
            for table in ctx.read_file(file, path, read, batch_rows=None):
                kinds = row_kind_strings(table.column(VALUE_KIND))
                values = table.select(list(self.columns))
                yield values.append_column(pa.field(ROW_KIND, pa.string(), nullable=False), kinds)
