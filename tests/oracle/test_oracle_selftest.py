"""Self-test of the pypaimon oracle harness: pypaimon alone, no snaplake code involved.

If these fail, every interop test built on ``PaimonOracle`` is suspect; fix these first.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.oracle import OracleError, PaimonOracle, pred, requires_paimon

pytestmark = [pytest.mark.integration, requires_paimon]

TABLE = "db.flights"
MONTHS = (1, 7, 12)
ROWS_PER_COMMIT = 30

SCHEMA = pa.schema(
    [
        pa.field("month", pa.int32()),
        pa.field("carrier", pa.string()),
        pa.field("distance", pa.float64()),
        pa.field("flight_date", pa.date32()),
        pa.field("departed_at", pa.timestamp("us")),
        pa.field("fare", pa.decimal128(10, 2)),
    ]
)


def _rows(commit: int, n: int = ROWS_PER_COMMIT) -> pa.Table:
    """Rows for one commit; commit 0 has distances < 1000, the others >= 1000.

    That keeps distance stats of commit 0's files disjoint from the rest, so a
    ``distance > 1000`` filter must prune commit 0's files.
    """
    months = [MONTHS[i % len(MONTHS)] for i in range(n)]
    base = 100.0 if commit == 0 else 1000.0 * commit
    return pa.table(
        {
            "month": pa.array(months, pa.int32()),
            "carrier": [f"C{commit}{i % 4}" for i in range(n)],
            "distance": [base + 10.0 * i for i in range(n)],
            "flight_date": [dt.date(2024, m, 1 + i % 28) for i, m in enumerate(months)],
            "departed_at": [
                # naive on purpose: TIMESTAMP(6) is Paimon's zone-less timestamp
                dt.datetime(2024, m, 1, 6, 0, 0, 123456) + dt.timedelta(minutes=i)
                for i, m in enumerate(months)
            ],
            "fare": [decimal.Decimal(f"{100 + commit}.{i:02d}") for i in range(n)],
        },
        schema=SCHEMA,
    )


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([("distance", "ascending"), ("carrier", "ascending")])


@pytest.fixture(scope="module")
def flights(tmp_path_factory: pytest.TempPathFactory) -> tuple[PaimonOracle, pa.Table]:
    """A partitioned table with three pypaimon commits (shared: the tests only read it)."""
    oracle = PaimonOracle(tmp_path_factory.mktemp("wh"))
    # pypaimon writes no value stats unless asked (its default metadata.stats-mode is none).
    oracle.create_table(
        TABLE, SCHEMA, partition_keys=["month"], options={"metadata.stats-mode": "full"}
    )
    data = pa.concat_tables([_rows(c) for c in range(3)])
    result = oracle.write(TABLE, data, commits=3)
    assert result["snapshot_ids"] == [1, 2, 3]
    assert all(len(files) == len(MONTHS) for files in result["files"])
    return oracle, data


def test_create_table_writes_schema_file(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    table_dir = oracle.create_table(TABLE, SCHEMA, partition_keys=["month"])
    assert table_dir == tmp_path / "db.db" / "flights"
    assert (table_dir / "schema" / "schema-0").is_file()
    assert oracle.snapshots(TABLE) == []


def test_read_back_all_rows_with_types(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, data = flights
    got = oracle.read(TABLE)
    assert got.schema == SCHEMA
    assert _sorted(got).equals(_sorted(data))


def test_three_commits_three_snapshots(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, data = flights
    snapshots = oracle.snapshots(TABLE)
    assert [s["id"] for s in snapshots] == [1, 2, 3]
    assert {s["commitKind"] for s in snapshots} == {"APPEND"}
    assert [s["totalRecordCount"] for s in snapshots] == [30, 60, 90]
    assert all(s["deltaRecordCount"] == ROWS_PER_COMMIT for s in snapshots)
    assert all(s["commitIdentifier"] == 2**63 - 1 for s in snapshots)
    assert all(s["version"] == 3 for s in snapshots)
    assert data.num_rows == 90


def test_partition_filter_prunes_files(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, data = flights
    everything = oracle.read_detailed(TABLE)
    july = oracle.read_detailed(TABLE, filter=pred.equal("month", 7))
    expected = data.filter(pc.equal(data["month"], 7))
    assert july.table.num_rows == expected.num_rows == 30
    assert set(july.table["month"].to_pylist()) == {7}
    assert everything.num_files == 9
    assert july.num_files == 3


def test_value_filter_prunes_by_stats(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, data = flights
    far = oracle.read_detailed(TABLE, filter=pred.greater_than("distance", 1000))
    expected = data.filter(pc.greater(data["distance"], 1000.0))
    assert far.table.num_rows == expected.num_rows == 59
    # commit 0's three files (distance < 1000) are pruned by their max stats.
    assert far.num_files == 6


def test_default_stats_mode_writes_no_value_stats(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(TABLE, SCHEMA, partition_keys=["month"])
    oracle.write(TABLE, _rows(0))
    entries = oracle.entries(TABLE)["entries"]
    assert len(entries) == len(MONTHS)
    assert all(e["value_stats_cols"] == [] for e in entries)
    assert all(e["value_stats"]["min_values"] == [] for e in entries)
    # No stats, so nothing can be pruned, but rows are still filtered exactly.
    far = oracle.read_detailed(TABLE, filter=pred.greater_than("distance", 10_000))
    assert (far.num_files, far.table.num_rows) == (3, 0)


def test_full_stats_mode_writes_value_stats(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, _ = flights
    listing = oracle.entries(TABLE, snapshot_id=1)
    assert listing["snapshot_id"] == 1
    assert len(listing["manifests"]) == 1
    july = next(e for e in listing["entries"] if e["partition"]["month"] == 7)
    assert july["value_stats_cols"] is None  # null means: stats for every column
    stats = july["value_stats"]
    assert stats["min_values"][:3] == [7, "C00", 110.0]
    assert stats["max_values"][2] == 380.0
    assert stats["min_values"][3:] == ["2024-07-01", "2024-07-01 06:01:00.123456", "100.01"]
    assert stats["null_counts"] == [0] * len(SCHEMA)
    assert (july["row_count"], july["bucket"], july["level"]) == (10, 0, 0)


def test_compound_and_typed_literals(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, data = flights
    got = oracle.read(
        TABLE,
        filter=pred.and_(
            pred.is_in("month", [1, 12]),
            pred.greater_or_equal("flight_date", dt.date(2024, 12, 1)),
            pred.less_than("fare", decimal.Decimal("101.50")),
        ),
    )
    mask = pc.and_(
        pc.and_(
            pc.is_in(data["month"], pa.array([1, 12], pa.int32())),
            pc.greater_equal(data["flight_date"], pa.scalar(dt.date(2024, 12, 1))),
        ),
        pc.less(data["fare"], pa.scalar(decimal.Decimal("101.50"), pa.decimal128(10, 2))),
    )
    expected = data.filter(mask)
    assert expected.num_rows > 0
    assert _sorted(got).equals(_sorted(expected))


def test_time_travel_and_projection(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, _ = flights
    first = oracle.read_detailed(TABLE, snapshot_id=1, columns=["carrier", "month"])
    assert first.snapshot_id == 1
    assert first.table.column_names == ["carrier", "month"]
    assert first.table.num_rows == ROWS_PER_COMMIT
    assert first.num_files == 3


def test_plan_files_match_disk(flights: tuple[PaimonOracle, pa.Table]) -> None:
    oracle, _ = flights
    files = oracle.plan_files(TABLE)
    on_disk = sorted(p.name for p in oracle.root.glob("db.db/flights/month=*/bucket-0/*"))
    assert files == on_disk
    assert all(f.startswith("data-") and f.endswith(".parquet") for f in files)
    plan = oracle.plan(TABLE, filter=pred.equal("month", 12))
    assert {e["partition"]["month"] for e in plan["entries"]} == {12}
    assert {e["bucket"] for e in plan["entries"]} == {0}


def test_overwrite_one_partition(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(TABLE, SCHEMA, partition_keys=["month"])
    data = pa.concat_tables([_rows(c) for c in range(3)])
    oracle.write(TABLE, data, commits=3)
    january = _rows(9, n=6).filter(pc.equal(_rows(9, n=6)["month"], 1))

    result = oracle.write(TABLE, january, overwrite={"month": 1})

    assert result["snapshot_ids"] == [4]
    snapshots = oracle.snapshots(TABLE)
    assert snapshots[-1]["commitKind"] == "OVERWRITE"
    got = oracle.read(TABLE)
    kept = data.filter(pc.not_equal(data["month"], 1))
    assert _sorted(got).equals(_sorted(pa.concat_tables([kept, january])))
    # The overwritten files are gone from the plan but still readable at snapshot 3.
    assert oracle.read(TABLE, snapshot_id=3).num_rows == data.num_rows
    assert len(oracle.plan_files(TABLE)) == 6 + 1


def test_driver_error_carries_stderr(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path, process_per_call=True)
    with pytest.raises(OracleError, match=r"(?s)op='read'.*Traceback"):
        oracle.read("db.missing")


def test_bench_ops_smoke(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(TABLE, SCHEMA, partition_keys=["month"])
    july = _rows(1).filter(pc.equal(_rows(1)["month"], 7))

    commits = oracle.bench_commits(TABLE, july, 3)
    plan = oracle.bench_plan(TABLE, repeat=2)
    both = oracle.bench_write_read(TABLE, july)

    assert len(commits["commit_s"]) == 3
    assert commits["commit_summary"]["p50"] > 0
    assert "commit 3/3 snapshot=3" in commits["stdout"]
    assert (len(plan["plan_s"]), plan["num_files"]) == (2, 3)
    assert (both["rows_written"], both["rows_read"]) == (10, 40)
    assert [s["id"] for s in oracle.snapshots(TABLE)] == [1, 2, 3, 4]


def test_is_null_filter(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(TABLE, SCHEMA, partition_keys=["month"])
    data = _rows(0, n=6)
    data = data.set_column(1, "carrier", pa.array(["AA", None, "UA", None, "DL", "B6"]))
    oracle.write(TABLE, data)
    got = oracle.read(TABLE, filter=pred.is_null("carrier"), columns=["distance", "carrier"])
    assert sorted(got["distance"].to_pylist()) == [110.0, 130.0]
    assert got["carrier"].to_pylist() == [None, None]


def test_session_answers_as_a_process_per_call_does(tmp_path: Path) -> None:
    """One ``--serve`` driver: same results, printed output kept, a failed op reported."""
    apart = PaimonOracle(tmp_path / "apart", process_per_call=True)
    together = PaimonOracle(tmp_path / "together")
    data = _rows(0)
    apart.create_table(TABLE, SCHEMA, partition_keys=["month"])
    apart.write(TABLE, data, commits=2)
    with together.session():
        together.create_table(TABLE, SCHEMA, partition_keys=["month"])
        written = together.write(TABLE, data, commits=2)
        with pytest.raises(OracleError, match=r"(?s)op='read'.*Traceback"):
            together.read("db.missing")
        got = together.read(TABLE)  # the session survives a failed op
        commits = together.bench_commits(TABLE, data.slice(0, 1), 1)
    assert written["snapshot_ids"] == [1, 2]
    assert _sorted(got).equals(_sorted(apart.read(TABLE))) and got.num_rows == data.num_rows
    assert "commit 1/1 snapshot=3" in commits["stdout"]
    assert together._session is None  # the process ended with the block


def test_shared_driver_reports_a_failed_op_and_replaces_a_dead_process(tmp_path: Path) -> None:
    """Outside a session, calls go to the run's shared driver (``tests/conftest.py``)."""
    import tests.oracle as oracle_module

    oracle = PaimonOracle(tmp_path)
    oracle.create_table(TABLE, SCHEMA, partition_keys=["month"])
    with pytest.raises(OracleError, match=r"(?s)op='read'.*Traceback"):
        oracle.read("db.missing")
    shared = oracle_module._shared
    assert shared is not None
    (session,) = shared._sessions.values()
    session.proc.kill()
    session.proc.wait()
    oracle.write(TABLE, _rows(0))  # a new driver process answers
    assert oracle.read(TABLE).num_rows == _rows(0).num_rows
    assert shared._sessions[tuple(oracle._serve_cmd())] is not session
