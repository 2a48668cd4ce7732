"""Helpers shared by the whole test suite.

A sample table schema and its rows; :func:`create_table` and
:func:`write_and_commit` (the one-commit write every test needs);
:func:`assert_same_rows` (two readers, e.g. snaplake and pypaimon, see the
same rows) and :func:`assert_java_rows` (Java Paimon read the expected
rows). The comparators assert and print a readable diff; none returns a
bool to be forgotten in a bare call.
"""

from __future__ import annotations

import datetime as dt
import io
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
import pyarrow as pa

if TYPE_CHECKING:
    import snaplake

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("carrier", pa.string()),
        pa.field("distance", pa.float64()),
        pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("price", pa.decimal128(10, 2)),
    ]
)


def rows(start: int, count: int, *, months: int = 3) -> pa.Table:
    """``count`` deterministic rows with ids ``start..start+count-1``."""
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "month": pa.array([1 + i % months for i in ids], pa.int32()),
            "carrier": pa.array([["AA", "UA", "DL", "B6 long carrier name"][i % 4] for i in ids]),
            "distance": pa.array([float(100 + (i * 37) % 3000) for i in ids]),
            "day": pa.array([dt.date(2013, 1, 1) + dt.timedelta(days=i % 300) for i in ids]),
            "ts": pa.array(
                [dt.datetime(2013, 1, 1) + dt.timedelta(minutes=i) for i in ids], pa.timestamp("us")
            ),
            "price": pa.array([Decimal(i % 1000) / 4 for i in ids], pa.decimal128(10, 2)),
        },
        schema=SCHEMA,
    )


def sorted_ids(table: pa.Table) -> list[int]:
    """The ``id`` column, sorted."""
    return sorted(table.column("id").to_pylist())


def avro_records(data: bytes) -> list[dict[str, Any]]:
    """The records of an Avro container file as plain fastavro decodes them."""
    out = []
    for rec in fastavro.reader(io.BytesIO(data)):
        assert isinstance(rec, dict), rec  # a record schema decodes to dicts
        out.append(rec)
    return out


def referenced_files(table: Any) -> list[str]:
    """Every manifest list, manifest and data file the retained snapshots of ``table`` reference."""
    from snaplake.store.format.manifest_list import decode_manifest_list

    paths: list[str] = []
    for snap in table.snapshots():
        for name in (snap.base_manifest_list, snap.delta_manifest_list):
            path = table.paths.manifest_path(name)
            paths.append(path)
            metas = decode_manifest_list(table.file_io.read_bytes(path), path=path)
            paths += [table.paths.manifest_path(m.file_name) for m in metas]
        for split in table.new_scan(snapshot_id=snap.id).plan():
            paths += split.paths
    return paths


# ------------------------------------------------------------------- tables, writes, commits
def create_table(
    where: snaplake.FileSystemCatalog | str | Path,
    identifier: str = "db.t",
    *,
    schema: pa.Schema = SCHEMA,
    partition_keys: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    bucket: int | None = None,
    ignore_if_exists: bool = False,
) -> snaplake.Table:
    """Create ``identifier`` in a catalog, or in a warehouse ``where`` (a directory or URI).

    An append table without ``primary_keys``, a primary-key table with them
    (then it needs a ``bucket``, as Paimon's do). ``bucket`` sets the option
    ``bucket`` (it wins over one in ``options``). Raises what
    ``FileSystemCatalog.create_table`` raises (e.g. ``TableAlreadyExistsError``
    unless ``ignore_if_exists``).
    """
    import snaplake

    opts = dict(options or {})
    if bucket is not None:
        opts["bucket"] = str(bucket)

    catalog = (
        where
        if isinstance(where, snaplake.FileSystemCatalog)
        else snaplake.FileSystemCatalog(str(where))
    )
    return catalog.create_table(
        identifier,
        schema=schema,
        partition_keys=list(partition_keys),
        primary_keys=list(primary_keys),
        options=opts,
        ignore_if_exists=ignore_if_exists,
    )


def write_and_commit(
    table: snaplake.Table,
    data: pa.Table | pa.RecordBatch | Sequence[Mapping[str, Any]],
    *,
    row_kinds: Sequence[str] | None = None,
    commit_user: str = "w",
    commit_identifier: int | None = None,
    overwrite: Mapping[str, Any] | bool | None = None,
    committer: Any = None,
) -> snaplake.CommitResult:
    """Write ``data`` with a fresh writer and commit it as one snapshot; return the CommitResult.

    ``data`` is an Arrow table (or batch) or a list of row dicts (converted
    with the table's latest Arrow schema). ``row_kinds`` (``"+I"``, ``"-U"``,
    ``"+U"``, ``"-D"``, one per row) are for primary-key tables.
    ``committer`` reuses a ``FileStoreCommit`` (else a new one for
    ``commit_user``). The CommitResult's ``snapshot_id`` is ``None`` when the
    commit published nothing (an empty write, or an identifier already committed).
    """
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        data = pa.Table.from_pylist(list(data), schema=table.arrow_schema)
    write = table.new_write(commit_user=commit_user)
    if row_kinds is None:
        write.write_arrow(data)
    else:
        write.write_arrow(data, row_kinds=list(row_kinds))
    commit = committer if committer is not None else table.new_commit(commit_user=commit_user)
    result: snaplake.CommitResult = commit.commit(
        write.prepare_commit(), commit_identifier=commit_identifier, overwrite=overwrite
    )
    return result


# ------------------------------------------------------------------------------ comparators
def _diff(left: Sequence[Any], right: Sequence[Any], names: tuple[str, str], limit: int = 5) -> str:
    """Rows only on one side (multisets, by ``repr``), at most ``limit`` of each."""
    a, b = Counter(map(repr, left)), Counter(map(repr, right))
    only_a, only_b = list((a - b).elements()), list((b - a).elements())
    lines = [f"{names[0]}: {len(left)} rows, {names[1]}: {len(right)} rows"]
    for name, only in ((names[0], only_a), (names[1], only_b)):
        if only:
            lines.append(f"only in {name} ({len(only)}):")
            lines += [f"  {r}" for r in only[:limit]]
    if not only_a and not only_b:  # same multiset: the order (or a type) differs
        first = next(i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y)
        lines.append(f"first difference at row {first}: {left[first]!r} != {right[first]!r}")
    return "\n".join(lines)


def assert_same_rows(
    ours: pa.Table,
    theirs: pa.Table,
    *,
    by: Sequence[str] = ("id",),
    same_columns: bool = False,
    reader: str = "pypaimon",
) -> None:
    """Assert that ``theirs`` (another reader's result) holds exactly the rows of ``ours``.

    ``theirs`` is cast to ``ours``' schema (another reader may widen types
    or drop nullability); with ``same_columns`` its column names must equal
    ``ours``' (order included), else it is first reduced to ``ours``' columns.
    Both sides are sorted by ``by`` and compared value by value (Arrow
    equality). Raises AssertionError naming ``reader`` with the rows only on
    one side.
    """
    if same_columns:
        assert theirs.column_names == ours.column_names, (
            f"{reader} read columns {theirs.column_names}, expected {ours.column_names}"
        )
    else:
        theirs = theirs.select(ours.column_names)
    theirs = theirs.cast(ours.schema)
    order = [(k, "ascending") for k in by]
    a, b = ours.sort_by(order), theirs.sort_by(order)
    if not b.equals(a):
        raise AssertionError(
            f"{reader} read different rows\n"
            + _diff(a.to_pylist(), b.to_pylist(), ("expected", reader))
        )


def _nan_free(value: Any) -> Any:
    """``value`` with NaN as a string (NaN sorts alike but ``nan != nan``)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, tuple):
        return tuple(_nan_free(x) for x in value)
    return value


def assert_java_rows(
    got: Sequence[Sequence[Any]],
    expected: pa.Table | pa.RecordBatch | Sequence[Sequence[Any]],
    *,
    context: str = "",
) -> None:
    """Assert that Java Paimon's rows (``JavaRead.rows``) are exactly ``expected``.

    ``expected`` is an Arrow table (encoded with
    ``tests.oracle.java_paimon.java_values``) or rows already encoded and
    sorted the same way. NaN equals NaN. Raises AssertionError with the rows
    only on one side (``context`` names the table or snapshot).
    """
    from tests.oracle.java_paimon import java_values

    if isinstance(expected, (pa.Table, pa.RecordBatch)):
        expected = java_values(expected)
    left = [tuple(r) for r in got]
    right = [tuple(r) for r in expected]
    if left == right:  # equal as they are: equal with NaN as a string too (no per-value pass)
        return
    left = [_nan_free(r) for r in left]
    right = [_nan_free(r) for r in right]
    if left != right:
        where = f" ({context})" if context else ""
        raise AssertionError(
            f"Java Paimon read different rows{where}\n" + _diff(right, left, ("expected", "java"))
        )
