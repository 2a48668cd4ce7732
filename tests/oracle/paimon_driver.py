"""Drive pypaimon (the format oracle) from a JSON request; run in the ``.venv-paimon`` venv.

Usage::

    .venv-paimon/bin/python tests/oracle/paimon_driver.py <request.json> <out.json>
    .venv-paimon/bin/python tests/oracle/paimon_driver.py --serve   # many requests (serve())

This script runs in its own interpreter with pypaimon 2.1.0 and pyarrow < 20, so it must
never import snaplake (which needs a newer pyarrow). Tabular data crosses the process
boundary as Arrow IPC *files* (stable across pyarrow versions); everything else is JSON.
The protocol is documented in ``tests/oracle/README.md``; ``tests/oracle/__init__.py``
(``PaimonOracle``) is the client used from the snaplake venv.

On success the script writes a JSON object to ``<out.json>`` and exits 0. On any error it
lets the exception propagate, so Python prints the traceback on stderr and exits 1.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import importlib.util
import io
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.common.json_util import JSON

_COMPARISONS = {
    "equal": "equal",
    "not_equal": "not_equal",
    "less_than": "less_than",
    "less_or_equal": "less_or_equal",
    "greater_than": "greater_than",
    "greater_or_equal": "greater_or_equal",
}


# --------------------------------------------------------------------------- helpers


def _read_ipc(path: str) -> pa.Table:
    """Read an Arrow IPC file (random-access format) fully into memory."""
    with pa.OSFile(path, "rb") as source:
        return pa.ipc.open_file(source).read_all()


def _write_ipc(table: pa.Table, path: str) -> None:
    """Write ``table`` as an uncompressed Arrow IPC file."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _catalog(request: dict[str, Any]) -> Any:
    return CatalogFactory.create({"warehouse": request["warehouse"]})


def _table(request: dict[str, Any], snapshot_id: int | None = None) -> Any:
    """Return a fresh pypaimon table handle, optionally time-travelled to ``snapshot_id``."""
    table = _catalog(request).get_table(request["table"])
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    return table


def _coerce_literal(value: Any, arrow_type: pa.DataType) -> Any:
    """Turn a JSON literal into the Python value pypaimon compares against the column.

    JSON has no dates, timestamps or decimals, so the client sends them as ISO strings
    / decimal strings; the field's Arrow type says how to parse them back.
    """
    if value is None:
        return None
    if pa.types.is_date(arrow_type) and isinstance(value, str):
        return dt.date.fromisoformat(value)
    if pa.types.is_timestamp(arrow_type) and isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    if pa.types.is_decimal(arrow_type):
        return decimal.Decimal(str(value))
    if pa.types.is_floating(arrow_type) and isinstance(value, int):
        return float(value)
    return value


def _build_predicate(node: dict[str, Any], builder: Any, schema: pa.Schema) -> Any:
    """Map the predicate-json tree onto pypaimon's ``PredicateBuilder``."""
    if "and" in node:
        return builder.and_predicates([_build_predicate(n, builder, schema) for n in node["and"]])
    if "or" in node:
        return builder.or_predicates([_build_predicate(n, builder, schema) for n in node["or"]])
    op, field = node["op"], node["field"]
    arrow_type = schema.field(field).type
    if op in _COMPARISONS:
        return getattr(builder, _COMPARISONS[op])(field, _coerce_literal(node["value"], arrow_type))
    if op in ("is_in", "is_not_in"):
        values = [_coerce_literal(v, arrow_type) for v in node["values"]]
        return getattr(builder, op)(field, values)
    if op in ("is_null", "is_not_null"):
        return getattr(builder, op)(field)
    if op == "between":
        low, high = (_coerce_literal(v, arrow_type) for v in node["values"])
        return builder.between(field, low, high)
    raise ValueError(f"unknown predicate op {op!r} in {node!r}")


def _read_builder(table: Any, request: dict[str, Any]) -> Any:
    builder = table.new_read_builder()
    if request.get("columns"):
        builder = builder.with_projection(list(request["columns"]))
    if request.get("filter"):
        schema = _table_arrow_schema(table)
        predicate = _build_predicate(request["filter"], builder.new_predicate_builder(), schema)
        builder = builder.with_filter(predicate)
    return builder


def _table_arrow_schema(table: Any) -> pa.Schema:
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.fields)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, dt.time, decimal.Decimal)):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _row_values(row: Any) -> list[Any]:
    """Field values of a pypaimon row (GenericRow has ``values``; BinaryRow decodes lazily)."""
    if row is None:
        return []
    values = getattr(row, "values", None)
    if values is not None:
        return list(values)
    return [row.get_field(i) for i in range(row.arity)]


def _split_info(split: Any, partition_keys: list[str]) -> list[dict[str, Any]]:
    partition = dict(zip(partition_keys, _row_values(split.partition), strict=False))
    return [
        {
            "file_name": f.file_name,
            "partition": partition,
            "bucket": split.bucket,
            "row_count": f.row_count,
            "file_size": f.file_size,
            "level": f.level,
        }
        for f in split.files
    ]


def _plan(table: Any, request: dict[str, Any]) -> tuple[Any, Any]:
    builder = _read_builder(table, request)
    return builder, builder.new_scan().plan()


def _commit_once(table: Any, data: pa.Table, overwrite: Any) -> dict[str, Any]:
    """Write ``data`` through one batch write builder and commit it; time the phases."""
    builder = table.new_batch_write_builder()
    if overwrite is True:
        builder = builder.overwrite()
    elif isinstance(overwrite, dict):
        builder = builder.overwrite(overwrite)
    write = builder.new_write()
    commit = builder.new_commit()
    try:
        t0 = time.perf_counter()
        write.write_arrow(data)
        messages = write.prepare_commit()
        t1 = time.perf_counter()
        commit.commit(messages)
        t2 = time.perf_counter()
    finally:
        write.close()
        commit.close()
    latest = table.snapshot_manager().get_latest_snapshot()
    return {
        "snapshot_id": latest.id if latest is not None else None,
        "files": [f.file_name for m in messages for f in m.new_files],
        "write_s": t1 - t0,
        "commit_s": t2 - t1,
    }


def _chunks(data: pa.Table, n: int) -> list[pa.Table]:
    """Split ``data`` into ``n`` contiguous slices of near-equal length."""
    if n < 1:
        raise ValueError(f"commits must be >= 1, got {n}")
    bounds = [round(i * data.num_rows / n) for i in range(n + 1)]
    return [data.slice(bounds[i], bounds[i + 1] - bounds[i]) for i in range(n)]


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]

    return {
        "min": ordered[0],
        "p50": statistics.median(ordered),
        "p90": pct(90),
        "p99": pct(99),
        "max": ordered[-1],
        "mean": statistics.fmean(ordered),
    }


# --------------------------------------------------------------------------- operations


def op_create_table(request: dict[str, Any]) -> dict[str, Any]:
    """Create database (if absent) and table from an IPC schema."""
    with pa.OSFile(request["schema_ipc"], "rb") as source:
        arrow_schema = pa.ipc.open_file(source).schema
    schema = Schema.from_pyarrow_schema(
        arrow_schema,
        partition_keys=list(request.get("partition_keys") or []) or None,
        primary_keys=list(request.get("primary_keys") or []) or None,
        options=dict(request.get("options") or {}),
    )
    catalog = _catalog(request)
    database = request["table"].split(".", 1)[0]
    catalog.create_database(database, True)
    catalog.create_table(request["table"], schema, False)
    table = catalog.get_table(request["table"])
    return {"table_path": str(table.table_path)}


def op_write(request: dict[str, Any]) -> dict[str, Any]:
    """Batch-write the IPC data, split into ``commits`` commits (one builder each)."""
    data = _read_ipc(request["data_ipc"])
    commits = int(request.get("commits") or 1)
    overwrite = request.get("overwrite")
    if overwrite is not None and overwrite is not True and not isinstance(overwrite, dict):
        raise ValueError(f"overwrite must be null, true or a partition dict, got {overwrite!r}")
    if overwrite is not None and commits != 1:
        raise ValueError("overwrite with commits > 1 is ambiguous; use commits=1")
    table = _table(request)
    results = [_commit_once(table, chunk, overwrite) for chunk in _chunks(data, commits)]
    return {
        "snapshot_ids": [r["snapshot_id"] for r in results],
        "files": [r["files"] for r in results],
        "rows": data.num_rows,
    }


def op_read(request: dict[str, Any]) -> dict[str, Any]:
    """Plan and read the table; write the rows to ``out_ipc``."""
    table = _table(request, request.get("snapshot_id"))
    if request.get("tag"):
        table = table.copy({"scan.tag-name": request["tag"]})
    builder, plan = _plan(table, request)
    splits = plan.splits()
    result = builder.new_read().to_arrow(splits)
    if result is None:  # pypaimon returns None for an empty plan in some versions
        result = pa.Table.from_batches([], schema=_table_arrow_schema(table))
    _write_ipc(result, request["out_ipc"])
    files = [f.file_name for s in splits for f in s.files]
    return {
        "ipc": request["out_ipc"],
        "rows": result.num_rows,
        "snapshot_id": plan.snapshot_id,
        "num_splits": len(splits),
        "num_files": len(files),
        "files": files,
        "arrow_schema": [f"{f.name}: {f.type}" for f in result.schema],
    }


def op_changelog(request: dict[str, Any]) -> dict[str, Any]:
    """Read the changes of snapshots ``from_snapshot``..latest as pypaimon's stream scan does.

    Each snapshot its follow-up scanner would scan (for a ``changelog-producer``
    table: the changelog files) is planned and read with row kinds; the rows go
    to ``out_ipc`` with ``_row_kind`` first and a ``__snapshot`` column last.
    """
    table = _table(request)
    builder = table.new_stream_read_builder().with_include_row_kind(True)
    scan = builder.new_streaming_scan()
    read = builder.new_read()
    manager = table.snapshot_manager()
    latest = manager.get_latest_snapshot()
    pieces, scanned = [], []
    for sid in range(int(request["from_snapshot"]), (latest.id if latest else 0) + 1):
        snapshot = manager.get_snapshot_by_id(sid)
        if not scan.follow_up_scanner.should_scan(snapshot):
            continue
        scanned.append(sid)
        splits = scan._create_follow_up_plan(snapshot).splits()
        part = read.to_arrow(splits) if splits else None
        if part is not None and part.num_rows:
            pieces.append(part.append_column("__snapshot", pa.array([sid] * part.num_rows)))
    result = pa.concat_tables(pieces) if pieces else pa.table({})
    _write_ipc(result, request["out_ipc"])
    return {"ipc": request["out_ipc"], "rows": result.num_rows, "scanned": scanned}


def op_snapshots(request: dict[str, Any]) -> dict[str, Any]:
    """List every snapshot as pypaimon's SnapshotManager decodes it (Paimon JSON keys)."""
    manager = _table(request).snapshot_manager()
    snapshots = [json.loads(JSON.to_json(s)) for s in manager.list_snapshots()]
    latest = manager.get_latest_snapshot()
    return {"snapshots": snapshots, "latest_id": latest.id if latest is not None else None}


def op_plan(request: dict[str, Any]) -> dict[str, Any]:
    """Plan a scan of the latest (or given) snapshot; list its data files."""
    table = _table(request, request.get("snapshot_id"))
    _, plan = _plan(table, request)
    splits = plan.splits()
    entries = [e for s in splits for e in _split_info(s, list(table.partition_keys or []))]
    return {
        "snapshot_id": plan.snapshot_id,
        "num_splits": len(splits),
        "files": sorted(e["file_name"] for e in entries),
        "entries": entries,
    }


def op_entries(request: dict[str, Any]) -> dict[str, Any]:
    """Live manifest entries of the latest (or given) snapshot, stats decoded by pypaimon.

    The scan planner drops value stats from planned files, so this reads the manifest
    list and manifests directly (ADD entries minus those cancelled by a DELETE).
    """
    from pypaimon.manifest.manifest_file_manager import ManifestFileManager
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    table = _table(request)
    manager = table.snapshot_manager()
    snapshot_id = request.get("snapshot_id")
    snapshot = (
        manager.get_latest_snapshot()
        if snapshot_id is None
        else manager.get_snapshot_by_id(int(snapshot_id))
    )
    if snapshot is None:
        return {"snapshot_id": snapshot_id, "manifests": [], "entries": []}
    manifests = ManifestListManager(table).read_all(snapshot)
    entries = ManifestFileManager(table).read_entries_parallel(manifests, drop_stats=False)
    keys = list(table.partition_keys or [])

    def stats(s: Any) -> dict[str, Any]:
        return {
            "min_values": _row_values(s.min_values),
            "max_values": _row_values(s.max_values),
            "null_counts": list(s.null_counts or []),
        }

    rows = []
    for e in entries:
        f = e.file
        rows.append(
            {
                "file_name": f.file_name,
                "partition": dict(zip(keys, _row_values(e.partition), strict=False)),
                "bucket": e.bucket,
                "total_buckets": e.total_buckets,
                "file_size": f.file_size,
                "row_count": f.row_count,
                "level": f.level,
                "schema_id": f.schema_id,
                "min_sequence_number": f.min_sequence_number,
                "max_sequence_number": f.max_sequence_number,
                "file_source": f.file_source,
                "extra_files": list(f.extra_files or []),
                "creation_time": str(f.creation_time) if f.creation_time is not None else None,
                "delete_row_count": f.delete_row_count,
                "value_stats_cols": f.value_stats_cols,
                "value_stats": stats(f.value_stats),
                "key_stats": stats(f.key_stats),
            }
        )
    return {
        "snapshot_id": snapshot.id,
        "manifests": [
            {
                "file_name": m.file_name,
                "file_size": m.file_size,
                "num_added_files": m.num_added_files,
                "num_deleted_files": m.num_deleted_files,
                "schema_id": m.schema_id,
            }
            for m in manifests
        ],
        "entries": sorted(rows, key=lambda r: r["file_name"]),
    }


def op_bench_commits(request: dict[str, Any]) -> dict[str, Any]:
    """``n`` sequential appends of the IPC data (one file if it is one partition)."""
    data = _read_ipc(request["data_ipc"])
    n = int(request["n"])
    table = _table(request)
    commit_s: list[float] = []
    total_s: list[float] = []
    for i in range(n):
        t0 = time.perf_counter()
        result = _commit_once(table, data, None)
        total_s.append(time.perf_counter() - t0)
        commit_s.append(result["commit_s"])
        print(
            f"commit {i + 1}/{n} snapshot={result['snapshot_id']} commit_s={result['commit_s']:.4f}"
        )
    first, last = commit_s[:10], commit_s[-10:]
    return {
        "n": n,
        "commit_s": commit_s,
        "total_s": total_s,
        "commit_summary": _summary(commit_s),
        "total_summary": _summary(total_s),
        "first10_median_s": statistics.median(first),
        "last10_median_s": statistics.median(last),
    }


def op_bench_appends(request: dict[str, Any]) -> dict[str, Any]:
    """``n`` appends of successive ``slice_rows``-row slices through one long-lived stream write.

    Slice ``i`` (counted from ``start``, wrapping around the data) is written, prepared and
    committed with ``commit_identifier = start + i``; ``total_s`` times the three together.
    """
    data = _read_ipc(request["data_ipc"])
    n, rows, start = int(request["n"]), int(request["slice_rows"]), int(request["start"])
    table = _table(request)
    builder = table.new_stream_write_builder()
    write = builder.new_write()
    commit = builder.new_commit()
    slices = data.num_rows // rows
    total_s: list[float] = []
    try:
        for i in range(start, start + n):
            piece = data.slice((i % slices) * rows, rows)
            t0 = time.perf_counter()
            write.write_arrow(piece)
            commit.commit(write.prepare_commit(i), i)
            total_s.append(time.perf_counter() - t0)
    finally:
        write.close()
        commit.close()
    return {"n": n, "total_s": total_s, "total_summary": _summary(total_s)}


def op_bench_plan(request: dict[str, Any]) -> dict[str, Any]:
    """Time planning the latest snapshot with a fresh catalog + table handle each round."""
    repeat = int(request.get("repeat") or 5)
    open_s: list[float] = []
    plan_s: list[float] = []
    num_files = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        table = _table(request)
        t1 = time.perf_counter()
        _, plan = _plan(table, request)
        num_files = sum(len(s.files) for s in plan.splits())
        t2 = time.perf_counter()
        open_s.append(t1 - t0)
        plan_s.append(t2 - t1)
    return {
        "repeat": repeat,
        "open_s": open_s,
        "plan_s": plan_s,
        "plan_summary": _summary(plan_s),
        "num_files": num_files,
    }


def op_bench_write_read(request: dict[str, Any]) -> dict[str, Any]:
    """One batch write + commit of the IPC data, then a full read of the table."""
    data = _read_ipc(request["data_ipc"])
    table = _table(request)
    written = _commit_once(table, data, None)
    t0 = time.perf_counter()
    fresh = _table(request)
    builder, plan = _plan(fresh, {})
    t1 = time.perf_counter()
    rows = builder.new_read().to_arrow(plan.splits())
    t2 = time.perf_counter()
    return {
        "write_s": written["write_s"],
        "commit_s": written["commit_s"],
        "plan_s": t1 - t0,
        "read_s": t2 - t1,
        "rows_written": data.num_rows,
        "rows_read": 0 if rows is None else rows.num_rows,
    }


def op_bench_upserts(request: dict[str, Any]) -> dict[str, Any]:
    """One commit per distinct ``__batch`` value of the IPC data, in order; time each."""
    data = _read_ipc(request["data_ipc"])
    batches = data.column("__batch").to_pylist()
    data = data.drop(["__batch"])
    table = _table(request)
    total_s: list[float] = []
    start = 0
    while start < len(batches):
        end = start
        while end < len(batches) and batches[end] == batches[start]:
            end += 1
        t0 = time.perf_counter()
        _commit_once(table, data.slice(start, end - start), None)
        total_s.append(time.perf_counter() - t0)
        start = end
    return {"total_s": total_s, "total_summary": _summary(total_s)}


def op_bench_read(request: dict[str, Any]) -> dict[str, Any]:
    """Time ``repeat`` full reads (plan + read) of the latest snapshot, fresh handle each."""
    repeat = int(request.get("repeat") or 5)
    read_s: list[float] = []
    rows = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        builder, plan = _plan(_table(request), {})
        result = builder.new_read().to_arrow(plan.splits())
        read_s.append(time.perf_counter() - t0)
        rows = 0 if result is None else result.num_rows
    return {"read_s": read_s, "rows": rows, "read_summary": _summary(read_s)}


def _schema_change(change: dict[str, Any]) -> Any:
    """Build one pypaimon ``SchemaChange`` from its JSON form (see README ``alter_table``)."""
    from pypaimon.schema.data_types import DataTypeParser
    from pypaimon.schema.schema_change import Move, SchemaChange

    kind = change["kind"]
    if kind == "add_column":
        move = None
        if change.get("first"):
            move = Move.first(change["name"])
        elif change.get("after"):
            move = Move.after(change["name"], change["after"])
        data_type = DataTypeParser.parse_data_type(change["type"])
        return SchemaChange.add_column(change["name"], data_type, change.get("comment"), move)
    if kind == "rename_column":
        return SchemaChange.rename_column(change["name"], change["new_name"])
    if kind == "drop_column":
        return SchemaChange.drop_column(change["name"])
    if kind == "update_column_type":
        data_type = DataTypeParser.parse_data_type(change["type"])
        return SchemaChange.update_column_type(change["name"], data_type, True)
    if kind == "update_column_nullability":
        return SchemaChange.update_column_nullability(change["name"], change["nullable"])
    if kind == "update_column_comment":
        return SchemaChange.update_column_comment(change["name"], change["comment"])
    if kind == "set_option":
        return SchemaChange.set_option(change["key"], change["value"])
    if kind == "remove_option":
        return SchemaChange.remove_option(change["key"])
    if kind == "update_comment":
        return SchemaChange.update_comment(change["comment"])
    raise ValueError(f"unknown schema change kind {kind!r}")


def op_alter_table(request: dict[str, Any]) -> dict[str, Any]:
    """Apply ``changes`` with pypaimon's ``catalog.alter_table``; return the new schema JSON."""
    changes = [_schema_change(c) for c in request["changes"]]
    catalog = _catalog(request)
    catalog.alter_table(request["table"], changes, False)
    table = catalog.get_table(request["table"])
    return {"schema": json.loads(JSON.to_json(table.table_schema))}


def op_create_tag(request: dict[str, Any]) -> dict[str, Any]:
    """Create a tag with pypaimon (``time_retained`` like ``"30 min"`` writes its retention)."""
    table = _table(request)
    table.create_tag(request["tag"], snapshot_id=request.get("snapshot_id"),
                     time_retained=request.get("time_retained"))  # fmt: skip
    return {"tag": request["tag"]}


OPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "create_table": op_create_table,
    "alter_table": op_alter_table,
    "write": op_write,
    "read": op_read,
    "changelog": op_changelog,
    "snapshots": op_snapshots,
    "create_tag": op_create_tag,
    "plan": op_plan,
    "entries": op_entries,
    "bench_commits": op_bench_commits,
    "bench_appends": op_bench_appends,
    "bench_plan": op_bench_plan,
    "bench_write_read": op_bench_write_read,
    "bench_upserts": op_bench_upserts,
    "bench_read": op_bench_read,
}


def run_request(request_path: str) -> dict[str, Any]:
    """Run the request in ``request_path``; return its result."""
    request = json.loads(Path(request_path).read_text())
    op = request.get("op")
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; expected one of {sorted(OPS)}")
    result = OPS[op](request)
    result["pypaimon_native"] = importlib.util.find_spec("pypaimon_rust") is not None
    return result


def _write_result(result: dict[str, Any], out_path: str) -> None:
    Path(out_path).write_text(json.dumps(result, default=_json_default))


def serve() -> int:
    """Run requests until stdin closes: one JSON line ``[request.json, out.json]`` each.

    Answers each on stdout with one line, ``ok`` or ``error <traceback as a JSON string>``;
    whatever an op prints goes into its result's ``stdout`` (C-level writes to stderr), so
    stdout carries only the answers. Every request opens a fresh catalog and table, as a
    process of its own would: pypaimon is imported once, nothing it read is reused.
    """
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # native writes to fd 1 go to stderr, never between the answers
    for line in sys.stdin:
        request_path, out_path = json.loads(line)
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                result = run_request(request_path)
            result["stdout"] = printed.getvalue()
            _write_result(result, out_path)
            answers.write("ok\n")
        except Exception:  # noqa: BLE001 - every failure is the client's to report
            answers.write(f"error {json.dumps(traceback.format_exc())}\n")
    return 0


def main(argv: list[str]) -> int:
    """Run one request file and write the result JSON (exceptions propagate: exit 1).

    ``--serve`` runs requests from stdin instead (:func:`serve`).
    """
    if argv[1:] == ["--serve"]:
        return serve()
    if len(argv) != 3:
        print(f"usage: {argv[0]} <request.json> <out.json> | --serve", file=sys.stderr)
        return 2
    _write_result(run_request(argv[1]), argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
