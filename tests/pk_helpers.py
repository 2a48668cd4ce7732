"""Shared helpers of the primary-key table tests: data, a table-level model, comparisons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from tests.merge_model import DELETE, INSERT, MergeModel, Version, visible

if TYPE_CHECKING:
    import snaplake

PK_SCHEMA = pa.schema(
    [
        pa.field("month", pa.int32()),
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("qty", pa.int64()),
        pa.field("price", pa.float64()),
        pa.field("ok", pa.bool_()),
    ]
)
PK_KEYS = ["month", "id"]
#: Paimon's merge engines, in the order the tests run them.
ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
_KINDS = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


def engine_options(engine: str, *, remove_record_on_delete: bool = False) -> dict[str, str]:
    """Options of a test table per merge engine (deletes allowed where Paimon allows them).

    Within what pypaimon 2.1.0 reads: partial-update without
    ``partial-update.remove-record-on-delete`` (so without deletes), aggregation
    without retractions.
    """
    base = {"bucket": "2", "merge-engine": engine}
    if engine == "partial-update" and remove_record_on_delete:
        base["partial-update.remove-record-on-delete"] = "true"
    if engine == "first-row":
        base["ignore-delete"] = "true"
    if engine == "aggregation":
        base.update(
            {
                "fields.qty.aggregate-function": "sum",
                "fields.price.aggregate-function": "max",
                "fields.name.aggregate-function": "listagg",
                "fields.ok.aggregate-function": "bool_or",
            }
        )
    return base


def dv_options(engine: str, **extra: str) -> dict[str, str]:
    """:func:`engine_options` with deletion vectors on, compacting after two sorted runs, 4 levels.

    ``extra`` options are applied last.
    """
    return {
        **engine_options(engine),
        "deletion-vectors.enabled": "true",
        "num-sorted-run.compaction-trigger": "2",
        "num-levels": "4",
        **extra,
    }


def dv_table(root: Path, **extra: str) -> snaplake.Table:
    """``db.t`` under the warehouse ``root``: a deduplicate table of :data:`PK_SCHEMA`
    partitioned by ``month``, created with :func:`dv_options` (``extra`` applied last)."""
    import snaplake

    catalog = snaplake.FileSystemCatalog(str(root))
    return catalog.create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options=dv_options("deduplicate", **extra),
    )  # fmt: skip


def pypaimon_rows(root: Path) -> list[dict[str, Any]]:
    """``db.t`` under the warehouse ``root`` as pypaimon 2.1.0 reads it, as :func:`sorted_rows`."""
    from tests.oracle import PaimonOracle

    return sorted_rows(PaimonOracle(root).read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA))


def engine_model(
    engine: str,
    columns: Sequence[str] = tuple(PK_SCHEMA.names),
    *,
    remove_record_on_delete: bool = False,
) -> MergeModel:
    """The row-at-a-time model of a table created with :func:`engine_options`."""
    if engine == "aggregation":
        return MergeModel(
            "aggregation",
            columns,
            functions={"month": "primary_key", "id": "primary_key", "qty": "sum",
                       "price": "max", "name": "listagg", "ok": "bool_or"},
            int_bits={"qty": 64},
        )  # fmt: skip
    return MergeModel(
        engine,
        columns,
        ignore_delete=engine == "first-row",
        remove_record_on_delete=remove_record_on_delete,
    )


@dataclass
class TableModel:
    """Every version ever written per key, in sequence order; the merged view on demand.

    Paimon folds versions incrementally (write buffer, compaction, read); for the
    engines and options the tests use, that equals one fold over all versions.
    """

    model: MergeModel
    keys: Sequence[str] = tuple(PK_KEYS)
    versions: dict[tuple[Any, ...], list[Version]] = field(default_factory=dict)
    ignore_delete: bool = False

    def apply(self, rows: Sequence[Mapping[str, Any]], kinds: Sequence[str] | None = None) -> None:
        """Record a write (``kinds`` as ``'+I'``... strings, default all ``+I``)."""
        for i, row in enumerate(rows):
            kind = _KINDS[kinds[i]] if kinds is not None else INSERT
            if self.ignore_delete and kind in (1, DELETE):
                continue
            key = tuple(row[k] for k in self.keys)
            self.versions.setdefault(key, []).append((kind, dict(row)))

    def snapshot(self) -> TableModel:
        """A copy (for reads of old snapshots)."""
        return TableModel(
            self.model,
            self.keys,
            {k: list(v) for k, v in self.versions.items()},
            self.ignore_delete,
        )

    def rows(self) -> list[dict[str, Any]]:
        """The merged view, sorted by key."""
        out = []
        for key in sorted(self.versions):
            row = visible(self.model.fold(self.versions[key]))
            if row is not None:
                out.append(row)
        return out


def sorted_rows(table: pa.Table, keys: Sequence[str] = tuple(PK_KEYS)) -> list[dict[str, Any]]:
    """Rows of ``table`` as dicts, sorted by ``keys``."""
    rows: list[dict[str, Any]] = table.sort_by([(k, "ascending") for k in keys]).to_pylist()
    return rows


def make_rows(start: int, n: int, *, month_mod: int = 3, seed: int = 0) -> list[dict[str, Any]]:
    """Deterministic rows with ids ``start..start+n-1``; some values null."""
    out = []
    for i in range(start, start + n):
        h = (i * 2654435761 + seed * 97) % 1000
        out.append(
            {
                "month": i % month_mod + 1,
                "id": i,
                "name": None if h % 7 == 0 else f"n{h % 50}",
                "qty": None if h % 11 == 0 else h % 40 - 10,
                "price": None if h % 13 == 0 else (h % 100) / 4.0,
                "ok": None if h % 5 == 0 else h % 2 == 0,
            }
        )
    return out


def to_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema = PK_SCHEMA) -> pa.Table:
    """Rows as an Arrow table of ``schema``."""
    return pa.Table.from_pylist(list(rows), schema=schema)


_ = DELETE


def bucket_layout(table: Any) -> list[Any]:
    """Per bucket, each live file's (level, rows, retractions, sequence range, source)."""
    return sorted(
        (
            s.partition_values,
            s.bucket,
            sorted(
                (
                    f.level,
                    f.row_count,
                    f.delete_row_count,
                    f.min_sequence_number,
                    f.max_sequence_number,
                    f.file_source,
                )
                for f in s.files
            ),
        )
        for s in table.new_scan().plan()
    )


def compact_counts(r: Any) -> tuple[Any, ...]:
    """The CompactResult fields that must agree between two ways of running one compaction."""
    return (r.snapshot_id, r.buckets_compacted, r.files_before, r.files_after, r.bytes_before,
            r.rows_rewritten, len(r.input_files), len(r.output_files))  # fmt: skip


def assert_compacted_like_twin(
    result: Any, expected: Any, table: Any, twin: Any, model: TableModel
) -> None:
    """``result`` (a compaction of ``table``) did what ``expected`` did to ``twin``.

    ``twin`` has ``table``'s history and was compacted in process. Asserts the same
    counts (:func:`compact_counts`), the same bucket layout, ``table``'s rows equal to
    ``model``'s, and that the files in ``table``'s bucket directories are its live files
    plus the compaction's inputs (left for expiry) and nothing else; listed through the
    table's FileIO, so local and S3 tables alike.
    """
    assert compact_counts(result) == compact_counts(expected)
    assert bucket_layout(table) == bucket_layout(twin)
    assert sorted_rows(table.to_arrow()) == model.rows()
    stored = {
        s.path.rsplit("/", 1)[-1]
        for s in table.file_io.list_files(table.root)
        if "/bucket-" in s.path
    }
    live = {f.file_name for s in table.new_scan().plan() for f in s.files}
    assert stored == live | {p.rsplit("/", 1)[-1] for p in result.input_files}
