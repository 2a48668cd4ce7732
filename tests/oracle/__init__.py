"""pypaimon as a format oracle, driven from the snaplake venv through a subprocess.

pypaimon 2.1.0 needs ``pyarrow<20`` while snaplake runs on a newer pyarrow, so pypaimon
lives in its own virtualenv (``.venv-paimon``, created by the Makefile). ``PaimonOracle``
writes a JSON request (plus Arrow IPC files for tabular data) into a temporary directory,
runs ``tests/oracle/paimon_driver.py`` with that venv's interpreter, and decodes the JSON
result (plus an IPC file for reads). See ``tests/oracle/README.md`` for the protocol.

Example::

    oracle = PaimonOracle(tmp_path / "wh")
    oracle.create_table("db.t", schema, partition_keys=["month"])
    oracle.write("db.t", data, commits=3)
    rows = oracle.read("db.t", filter=pred.equal("month", 7))
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import decimal
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.oracle._process import DriverSession, OracleError, SharedDrivers

__all__ = [
    "OracleError",
    "OracleRead",
    "PaimonOracle",
    "paimon_python",
    "pred",
    "requires_paimon",
    "shared_driver",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().with_name("paimon_driver.py")
PAIMON_PYTHON_ENV = "SNAPLAKE_PAIMON_PYTHON"

Predicate = Mapping[str, Any]
"""A predicate-json node: ``{"and": [...]}``, ``{"or": [...]}`` or a leaf (see ``pred``)."""


def paimon_python() -> Path:
    """Return the interpreter of the pypaimon venv.

    ``$SNAPLAKE_PAIMON_PYTHON`` wins when set; otherwise ``<repo>/.venv-paimon/bin/python``.
    The path may not exist; ``requires_paimon`` skips tests in that case.
    """
    override = os.environ.get(PAIMON_PYTHON_ENV)
    if override:
        return Path(override)
    return REPO_ROOT / ".venv-paimon" / "bin" / "python"


requires_paimon = pytest.mark.skipif(
    not paimon_python().exists(),
    reason=(
        f"pypaimon venv not found at {paimon_python()} (create it with `make paimon-venv`, "
        f"or point ${PAIMON_PYTHON_ENV} at a python with pypaimon==2.1.0 and pyarrow<20)"
    ),
)
"""Skip marker for tests that need the pypaimon venv; skips ONLY when it is missing."""


@dataclasses.dataclass(frozen=True, slots=True)
class OracleRead:
    """A pypaimon read: the rows plus what the scan plan looked like.

    Attributes:
        table: The rows, as pypaimon returned them (row order is split order).
        snapshot_id: The snapshot the plan read (None for an empty table).
        num_splits: Splits in the plan.
        num_files: Data files across all splits (shows partition/stats pruning).
        files: Data file names across all splits.
    """

    table: pa.Table
    snapshot_id: int | None
    num_splits: int
    num_files: int
    files: list[str]


class pred:  # noqa: N801 - a namespace of predicate constructors, used as pred.equal(...)
    """Constructors for predicate-json nodes, mirroring pypaimon's ``PredicateBuilder``.

    Dates, datetimes and decimals are sent as strings and parsed back by the driver
    according to the column's type.
    """

    @staticmethod
    def and_(*children: Predicate) -> dict[str, Any]:
        return {"and": list(children)}

    @staticmethod
    def or_(*children: Predicate) -> dict[str, Any]:
        return {"or": list(children)}

    @staticmethod
    def equal(field: str, value: Any) -> dict[str, Any]:
        return {"op": "equal", "field": field, "value": value}

    @staticmethod
    def not_equal(field: str, value: Any) -> dict[str, Any]:
        return {"op": "not_equal", "field": field, "value": value}

    @staticmethod
    def less_than(field: str, value: Any) -> dict[str, Any]:
        return {"op": "less_than", "field": field, "value": value}

    @staticmethod
    def less_or_equal(field: str, value: Any) -> dict[str, Any]:
        return {"op": "less_or_equal", "field": field, "value": value}

    @staticmethod
    def greater_than(field: str, value: Any) -> dict[str, Any]:
        return {"op": "greater_than", "field": field, "value": value}

    @staticmethod
    def greater_or_equal(field: str, value: Any) -> dict[str, Any]:
        return {"op": "greater_or_equal", "field": field, "value": value}

    @staticmethod
    def is_in(field: str, values: Sequence[Any]) -> dict[str, Any]:
        return {"op": "is_in", "field": field, "values": list(values)}

    @staticmethod
    def is_null(field: str) -> dict[str, Any]:
        return {"op": "is_null", "field": field}

    @staticmethod
    def is_not_null(field: str) -> dict[str, Any]:
        return {"op": "is_not_null", "field": field}


_shared: SharedDrivers | None = None


@contextlib.contextmanager
def shared_driver() -> Iterator[None]:
    """Send, inside the block, every call not in a ``session()`` to one shared driver.

    One ``--serve`` process per interpreter answers every ``PaimonOracle`` (except those
    made with ``process_per_call=True``), started on first use and again after a death or
    a timeout; the processes end with the block. ``tests/conftest.py`` opens it for the
    whole pytest run: importing pypaimon is most of a one-shot call's time. Each request
    still opens a fresh catalog and table (see ``PaimonOracle.session``).
    """
    global _shared
    if _shared is not None:
        yield
        return
    _shared = SharedDrivers(cwd=REPO_ROOT)
    try:
        yield
    finally:
        shared, _shared = _shared, None
        shared.close()


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot send {type(value).__name__} to the pypaimon driver: {value!r}")


def _write_ipc(table: pa.Table | pa.Schema, path: Path) -> None:
    """Write a table (or an empty table of a schema) as an Arrow IPC file pyarrow<20 reads."""
    if isinstance(table, pa.Schema):
        table = table.empty_table()
    options = pa.ipc.IpcWriteOptions(metadata_version=pa.ipc.MetadataVersion.V5)
    with (
        pa.OSFile(str(path), "wb") as sink,
        pa.ipc.new_file(sink, table.schema, options=options) as w,
    ):
        w.write_table(table)


def _read_ipc(path: Path) -> pa.Table:
    with pa.OSFile(str(path), "rb") as source:
        return pa.ipc.open_file(source).read_all()


class PaimonOracle:
    """Run pypaimon operations on a warehouse through the driver subprocess.

    Args:
        root: The warehouse directory pypaimon's filesystem catalog uses (tables live in
            ``root/<db>.db/<table>``). Request files go to a separate temp directory,
            never into the warehouse.
        python: The pypaimon venv's interpreter; defaults to ``paimon_python()``.
        timeout_s: Per-call subprocess timeout in seconds (benchmarks may pass more).
        process_per_call: Run each call outside a ``session()`` in a process of its own
            even inside ``shared_driver()``.
    """

    def __init__(
        self,
        root: Path,
        *,
        python: Path | None = None,
        timeout_s: float = 300.0,
        process_per_call: bool = False,
    ):
        self.root = Path(root)
        self.python = python if python is not None else paimon_python()
        self.timeout_s = timeout_s
        self.process_per_call = process_per_call
        self._session: DriverSession | None = None

    @contextlib.contextmanager
    def session(self) -> Iterator[PaimonOracle]:
        """Send every call made inside the block to one driver process (``--serve``).

        pypaimon is then imported once instead of once per call, which is most of a
        call's time. Each request still opens a fresh catalog and table, so results
        are those of a process per call. Nested sessions share the outer one.

        Raises:
            OracleError: as :meth:`run`; a failed op leaves the session usable.
        """
        if self._session is not None:
            yield self
            return
        self._session = DriverSession(self._serve_cmd(), cwd=REPO_ROOT)
        try:
            yield self
        finally:
            session, self._session = self._session, None
            session.close()

    # ----------------------------------------------------------------- plumbing

    def _serve_cmd(self) -> list[str]:
        return [str(self.python), str(DRIVER), "--serve"]

    def run(
        self,
        request: Mapping[str, Any],
        *,
        ipc_inputs: Mapping[str, pa.Table | pa.Schema] | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Send one raw request; return the driver's result JSON.

        Args:
            request: The request JSON (``op`` and its fields); ``warehouse`` defaults to
                ``root``.
            ipc_inputs: Request keys to fill with paths of IPC files holding these
                tables/schemas (e.g. ``{"data_ipc": table}``).
            timeout_s: Overrides the instance timeout for this call.

        Raises:
            OracleError: The driver exited non-zero or timed out (stderr included).
        """
        with tempfile.TemporaryDirectory(prefix="paimon-oracle-") as tmp:
            tmpdir = Path(tmp)
            body = {"warehouse": str(self.root), **request}
            for key, value in (ipc_inputs or {}).items():
                path = tmpdir / f"{key}.arrow"
                _write_ipc(value, path)
                body[key] = str(path)
            if body.get("op") in ("read", "changelog"):
                body["out_ipc"] = str(tmpdir / "out.arrow")
            request_path = tmpdir / "request.json"
            out_path = tmpdir / "out.json"
            request_path.write_text(json.dumps(body, default=_json_default))
            timeout = timeout_s if timeout_s is not None else self.timeout_s
            line = json.dumps([str(request_path), str(out_path)])
            if self._session is not None:
                self._session.call(line, op=body.get("op"), timeout_s=timeout)
                return self._result(out_path)
            if _shared is not None and not self.process_per_call:
                _shared.call(self._serve_cmd(), line, op=body.get("op"), timeout_s=timeout)
                return self._result(out_path)
            cmd = [str(self.python), str(DRIVER), str(request_path), str(out_path)]
            try:
                proc = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                      timeout=timeout, cwd=REPO_ROOT)  # fmt: skip
            except subprocess.CalledProcessError as exc:
                raise OracleError(
                    f"pypaimon driver op={body.get('op')!r} failed with exit code "
                    f"{exc.returncode}\nrequest: {json.dumps(body, default=_json_default)}\n"
                    f"--- stderr ---\n{exc.stderr}"
                ) from exc
            except subprocess.TimeoutExpired as exc:
                raise OracleError(
                    f"pypaimon driver op={body.get('op')!r} timed out after {exc.timeout} s\n"
                    # TimeoutExpired carries bytes even under text=True
                    f"--- stderr ---\n{(exc.stderr or b'').decode(errors='replace')}"
                ) from exc
            except FileNotFoundError as exc:
                raise OracleError(f"pypaimon interpreter not found: {self.python}") from exc
            return {**self._result(out_path), "stdout": proc.stdout}

    @staticmethod
    def _result(out_path: Path) -> dict[str, Any]:
        """The driver's result JSON, with the rows of a read as ``arrow``."""
        result: dict[str, Any] = json.loads(out_path.read_text())
        if "ipc" in result:
            result["arrow"] = _read_ipc(Path(result["ipc"]))
        return result

    # ----------------------------------------------------------------- table ops

    def create_table(
        self,
        table: str,
        schema: pa.Schema,
        *,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
    ) -> Path:
        """Create ``db.t`` (and its database) with pypaimon; return the table directory."""
        result = self.run(
            {
                "op": "create_table",
                "table": table,
                "partition_keys": list(partition_keys),
                "primary_keys": list(primary_keys),
                "options": dict(options or {}),
            },
            ipc_inputs={"schema_ipc": schema},
        )
        return Path(result["table_path"])

    def alter_table(self, table: str, changes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Alter ``db.t`` with pypaimon's ``catalog.alter_table``; return its new schema JSON.

        Each change is ``{"kind": ..., ...}``: ``add_column`` (``name``, ``type`` in Paimon's
        SQL spelling, optional ``comment``, ``first``, ``after``), ``rename_column``
        (``name``, ``new_name``), ``drop_column`` (``name``), ``update_column_type``
        (``name``, ``type``; nullability kept), ``update_column_nullability`` (``name``,
        ``nullable``), ``update_column_comment`` (``name``, ``comment``), ``set_option`` /
        ``remove_option`` (``key``[, ``value``]), ``update_comment`` (``comment``).
        """
        result = self.run({"op": "alter_table", "table": table, "changes": list(changes)})
        schema: dict[str, Any] = result["schema"]
        return schema

    def write(
        self,
        table: str,
        data: pa.Table,
        *,
        overwrite: Mapping[str, Any] | bool | None = None,
        commits: int = 1,
    ) -> dict[str, Any]:
        """Batch-write ``data`` with pypaimon, split into ``commits`` sequential commits.

        Args:
            table: ``"db.t"``.
            data: Rows matching the table schema.
            overwrite: None appends; a partition dict (``{"month": 1}``) overwrites that
                partition; True overwrites the whole table (dynamic for partitioned tables:
                pypaimon replaces only the partitions present in ``data``). Needs
                ``commits=1``.
            commits: Number of commits (contiguous slices of ``data``, one builder each).

        Returns:
            ``{"snapshot_ids": [...], "files": [[names per commit], ...], "rows": n}``.
        """
        if overwrite is False:
            overwrite = None
        return self.run(
            {
                "op": "write",
                "table": table,
                "overwrite": dict(overwrite) if isinstance(overwrite, Mapping) else overwrite,
                "commits": commits,
            },
            ipc_inputs={"data_ipc": data},
        )

    def read_detailed(
        self,
        table: str,
        *,
        snapshot_id: int | None = None,
        columns: Sequence[str] | None = None,
        filter: Predicate | None = None,
        tag: str | None = None,
    ) -> OracleRead:
        """Read with pypaimon and report the plan's split/file counts (proves pruning).

        ``tag`` time-travels by tag name (``scan.tag-name``).
        """
        result = self.run(
            {
                "op": "read",
                "table": table,
                "snapshot_id": snapshot_id,
                "tag": tag,
                "columns": list(columns) if columns is not None else None,
                "filter": filter,
            }
        )
        return OracleRead(
            table=result["arrow"],
            snapshot_id=result["snapshot_id"],
            num_splits=result["num_splits"],
            num_files=result["num_files"],
            files=result["files"],
        )

    def read(
        self,
        table: str,
        *,
        snapshot_id: int | None = None,
        columns: Sequence[str] | None = None,
        filter: Predicate | None = None,
        tag: str | None = None,
    ) -> pa.Table:
        """Read rows with pypaimon (latest, ``snapshot_id`` or ``tag``), maybe projected/filtered.

        pypaimon applies the filter to rows as well as to the plan, so the result holds
        only matching rows. Row order is pypaimon's split order: sort before comparing.
        """
        return self.read_detailed(
            table, snapshot_id=snapshot_id, columns=columns, filter=filter, tag=tag
        ).table

    def changelog(self, table: str, *, from_snapshot: int = 1) -> pa.Table:
        """The changes of snapshots ``from_snapshot``..latest as pypaimon's stream scan reads them.

        Returns:
            The rows with ``_row_kind`` (``+I``, ``-U``, ``+U``, ``-D``) first and the
            snapshot id in ``__snapshot`` last (pypaimon's split order within a snapshot).
        """
        result = self.run({"op": "changelog", "table": table, "from_snapshot": from_snapshot})
        changes: pa.Table = result["arrow"]
        return changes

    def create_tag(
        self,
        table: str,
        tag: str,
        *,
        snapshot_id: int | None = None,
        time_retained: str | None = None,
    ) -> None:
        """Create tag ``tag`` with pypaimon (with ``time_retained``, e.g. ``"30 min"``)."""
        self.run({"op": "create_tag", "table": table, "tag": tag, "snapshot_id": snapshot_id,
                  "time_retained": time_retained})  # fmt: skip

    def snapshots(self, table: str) -> list[dict[str, Any]]:
        """Every snapshot, ascending by id, as pypaimon's SnapshotManager decodes it.

        Keys are Paimon's JSON names (``id``, ``commitKind``, ``totalRecordCount``, ...);
        keys whose value is null are omitted, as pypaimon writes them.
        """
        snapshots: list[dict[str, Any]] = self.run({"op": "snapshots", "table": table})["snapshots"]
        return snapshots

    def plan(
        self,
        table: str,
        *,
        snapshot_id: int | None = None,
        filter: Predicate | None = None,
    ) -> dict[str, Any]:
        """pypaimon's scan plan: ``snapshot_id``, ``num_splits``, ``files``, ``entries``.

        Each entry has ``file_name``, ``partition`` (dict), ``bucket``, ``row_count``,
        ``file_size`` and ``level``. pypaimon's planner strips value stats from planned
        files; use ``entries`` to see them.
        """
        return self.run(
            {"op": "plan", "table": table, "snapshot_id": snapshot_id, "filter": filter}
        )

    def plan_files(
        self,
        table: str,
        *,
        snapshot_id: int | None = None,
        filter: Predicate | None = None,
    ) -> list[str]:
        """Sorted data file names live in the latest (or given) snapshot, per pypaimon."""
        files: list[str] = self.plan(table, snapshot_id=snapshot_id, filter=filter)["files"]
        return files

    def entries(self, table: str, *, snapshot_id: int | None = None) -> dict[str, Any]:
        """Live manifest entries (with stats) of the latest or given snapshot, per pypaimon.

        Returns ``{"snapshot_id", "manifests": [...], "entries": [...]}``; each entry has
        ``file_name``, ``partition``, ``bucket``, ``total_buckets``, ``file_size``,
        ``row_count``, ``level``, ``schema_id``, ``min/max_sequence_number``,
        ``file_source``, ``extra_files``, ``creation_time``, ``delete_row_count``,
        ``value_stats_cols`` (None = every column; ``[]`` = no stats, which is what
        pypaimon writes under its default ``metadata.stats-mode=none``) and
        ``value_stats`` / ``key_stats`` as ``{"min_values", "max_values", "null_counts"}``
        (dates, timestamps and decimals as strings).
        """
        return self.run({"op": "entries", "table": table, "snapshot_id": snapshot_id})

    # ----------------------------------------------------------------- benchmarks

    def bench_commits(
        self, table: str, data: pa.Table, n: int, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """``n`` sequential appends of ``data`` (single-partition data: one file each).

        Returns ``commit_s`` (list: the ``commit()`` call alone), ``total_s`` (write +
        prepare + commit), their summaries (``min/p50/p90/p99/max/mean``), and
        ``first10_median_s`` / ``last10_median_s`` of ``commit_s``.
        """
        return self.run(
            {"op": "bench_commits", "table": table, "n": n},
            ipc_inputs={"data_ipc": data},
            timeout_s=timeout_s,
        )

    def bench_appends(
        self, table: str, data: pa.Table, *, slice_rows: int, start: int, n: int,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """``n`` appends of successive ``slice_rows``-row slices of ``data`` (from slice ``start``).

        One long-lived stream write and commit (identifiers ``start..start+n-1``). Returns
        ``total_s`` (list: write_arrow + prepare_commit + commit) and ``total_summary``.
        """
        return self.run(
            {"op": "bench_appends", "table": table, "n": n, "slice_rows": slice_rows,
             "start": start},
            ipc_inputs={"data_ipc": data},
            timeout_s=timeout_s,
        )  # fmt: skip

    def bench_plan(
        self,
        table: str,
        *,
        repeat: int = 5,
        filter: Predicate | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Time a scan plan of the latest snapshot, with a fresh table handle per round.

        Returns ``open_s`` (catalog + get_table), ``plan_s`` (new_scan().plan()),
        ``plan_summary`` and ``num_files``.
        """
        return self.run(
            {"op": "bench_plan", "table": table, "repeat": repeat, "filter": filter},
            timeout_s=timeout_s,
        )

    def bench_read(
        self, table: str, *, repeat: int = 5, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Time ``repeat`` full reads (fresh handle, plan, ``to_arrow``) of the latest snapshot.

        Returns ``read_s`` (seconds per read), ``rows`` and ``read_summary``.
        """
        return self.run({"op": "bench_read", "table": table, "repeat": repeat}, timeout_s=timeout_s)

    def bench_write_read(
        self, table: str, data: pa.Table, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """One write+commit of ``data``, then a full read with a fresh handle.

        Returns ``write_s``, ``commit_s``, ``plan_s``, ``read_s``, ``rows_written``,
        ``rows_read``.
        """
        return self.run(
            {"op": "bench_write_read", "table": table},
            ipc_inputs={"data_ipc": data},
            timeout_s=timeout_s,
        )

    def bench_upserts(
        self, table: str, data: pa.Table, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """One write+commit per distinct ``__batch`` value of ``data`` (in order).

        Returns ``total_s`` (list: write + prepare + commit per commit) and its summary.
        """
        return self.run(
            {"op": "bench_upserts", "table": table},
            ipc_inputs={"data_ipc": data},
            timeout_s=timeout_s,
        )
