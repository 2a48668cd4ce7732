"""Property: a primary-key table reads the same whatever its levels' file formats.

Random upserts, deletes and compactions (minor and full) go into one table
per drawn format layout (``file.format``, ``file.format.per.level``,
``changelog-file.format``); after every step snaplake's merged view equals
the row-at-a-time model, every file's extension is its level's format (or
the format it was written in, for a file upgraded without a rewrite), and
every file reads back exactly ``row_count`` rows.
"""

from __future__ import annotations

import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.merge_model import MergeModel
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, make_rows, sorted_rows, to_table

from snaplake.catalog import FileSystemCatalog
from snaplake.mergetree.kv import kv_schema
from snaplake.mergetree.read import read_kv_file
from snaplake.store.format.file_format import format_of_file

_LAYOUTS = [
    {"file.format": "orc"},
    {"file.format": "avro"},
    {"file.format": "parquet", "file.format.per.level": "0:avro,3:orc"},
    {"file.format": "orc", "file.format.per.level": "0:parquet,2:avro",
     "changelog-producer": "input", "changelog-file.format": "avro"},
]  # fmt: skip

_STEP = st.one_of(
    st.tuples(st.just("upsert"), st.integers(0, 60), st.integers(1, 40), st.integers(0, 9)),
    st.tuples(st.just("delete"), st.integers(0, 60), st.integers(1, 20), st.just(0)),
    st.tuples(st.just("compact"), st.just(0), st.just(0), st.just(0)),
    st.tuples(st.just("full"), st.just(0), st.just(0), st.just(0)),
)


@settings(max_examples=20, deadline=None)
@given(layout=st.sampled_from(_LAYOUTS), steps=st.lists(_STEP, min_size=1, max_size=8))
def test_merged_view_is_independent_of_file_formats(
    layout: dict[str, str], steps: list[tuple[str, int, int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as d:
        table = FileSystemCatalog(d).create_table(
            "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
            options={"bucket": "2", "num-sorted-run.compaction-trigger": "2",
                     "num-levels": "4", **layout},
        )  # fmt: skip
        model = TableModel(MergeModel("deduplicate", PK_SCHEMA.names))
        writer = table.new_write(commit_user="w")
        commit = table.new_commit(commit_user="w")
        opts = table.schema().core_options
        formats: dict[str, str] = {}  # file name -> the format it was written in
        for ident, (op, start, n, seed) in enumerate(steps):
            if op in ("upsert", "delete"):
                rows = make_rows(start, n, seed=seed)
                kinds = ["+I" if op == "upsert" else "-D"] * n
                writer.write_arrow(to_table(rows), row_kinds=kinds)
                commit.commit(writer.prepare_commit(), commit_identifier=ident)
                model.apply(rows, kinds)
            else:
                table.compact(full=op == "full")
            _check_files(table, opts, formats)
            assert sorted_rows(table.to_arrow()) == model.rows()


def _check_files(table: Any, opts: Any, formats: dict[str, str]) -> None:
    """A file new since the last step has its level's format; a known one keeps its format."""
    schema = table.schema()
    layout = kv_schema(schema.arrow_schema, schema.trimmed_primary_keys)
    for split in table.new_scan().plan():
        for f, path in zip(split.files, split.paths, strict=True):
            fmt = format_of_file(path).name
            assert formats.setdefault(f.file_name, opts.format_for_level(f.level)) == fmt
            got = sum(t.num_rows for t in read_kv_file(table.file_io, path, layout))
            assert got == f.row_count
