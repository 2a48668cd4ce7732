"""snaplake.spark.compact and remove_orphan_files over {classic, Connect} x {append, primary key}.

Two sessions for the whole module, one after the other (pytest groups the tests by
the module-scoped ``session`` parameter): a classic ``local[2,3]`` session, whose
tasks may fail up to 3 times so a task failing on its first attempt is retried as
on a cluster; then a Spark Connect session on a local server (``connect`` of
tests/spark/test_connect.py), whose units run in the server's Python workers while
planning and the commit run here, in the client.

Each table kind has its checks in one module with the same ``check_*`` names
(tests/spark/maintenance_checks.py, tests/spark/pk_maintenance_checks.py). Cases
that need task retries or a killable driver run on the classic session only; the
orphan clean is checked on append tables, the driver-side rewrite of small buckets
and the lost conflict on primary-key tables.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.helpers import write_and_commit
from tests.oracle import requires_paimon
from tests.oracle.java_paimon import requires_java_paimon
from tests.pk_helpers import (
    TableModel,
    assert_compacted_like_twin,
    engine_model,
    make_rows,
    sorted_rows,
    to_table,
)
from tests.spark import maintenance_checks, pk_maintenance_checks
from tests.spark.conftest import new_session
from tests.spark.maintenance_checks import data_files, live_files
from tests.spark.test_connect import connect  # noqa: F401 - the Connect session, by name

import snaplake
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.compaction.merge_tree_plan import MergeTreeCompactPlanner
from snaplake.spark import compact
from snaplake.spark._common import is_connect
from snaplake.spark.maintenance import run_compaction

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

#: The classic session's master: 2 threads, a failed task retried up to 3 times.
CLASSIC_MASTER = "local[2,3]"
SESSIONS = ["classic", "connect"]
CLASSIC = pytest.mark.parametrize("session", ["classic"], indirect=True)
#: Table kind -> its checks; Java Paimon reads the primary-key results too.
KINDS = [
    pytest.param("append", id="append"),
    pytest.param("primary-key", id="primary-key", marks=requires_java_paimon),
]
_CHECKS: dict[str, ModuleType] = {
    "append": maintenance_checks,
    "primary-key": pk_maintenance_checks,
}


@pytest.fixture(scope="module", params=SESSIONS)
def session(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The module's classic session, then (after the classic one stopped) its Connect session."""
    if request.param == "connect":
        remote = request.getfixturevalue("connect")
        assert is_connect(remote)
        yield remote
        return
    classic = new_session(CLASSIC_MASTER)
    assert not is_connect(classic)
    yield classic
    for query in classic.streams.active:
        query.stop()
    classic.stop()


def checks(kind: str) -> ModuleType:
    """The checks of table kind ``kind`` (``"append"`` or ``"primary-key"``)."""
    return _CHECKS[kind]


# ------------------------------------------------------------------ both sessions, both kinds
@requires_paimon
@pytest.mark.parametrize("full", [False, True], ids=["universal", "full"])
@pytest.mark.parametrize("kind", KINDS)
def test_compact_equals_table_compact(session: Any, tmp_path: Path, kind: str, full: bool) -> None:
    checks(kind).check_compact_equals_in_process(session, tmp_path, full=full)


@requires_paimon
@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_compact_while_a_writer_commits(session: Any, tmp_path: Path, kind: str) -> None:
    checks(kind).check_compact_with_concurrent_writer(session, tmp_path)


@pytest.mark.s3
@pytest.mark.parametrize("kind", ["append", "primary-key"])
def test_compact_on_s3(session: Any, kind: str) -> None:
    """Classic against moto, Connect against SeaweedFS."""
    from tests.s3_servers import start_moto, start_seaweedfs

    server = start_seaweedfs() if is_connect(session) else start_moto()
    try:
        checks(kind).check_compact_on_s3(session, server.endpoint)
    finally:
        server.stop()


# ------------------------------------------------------------------------- both sessions
def test_remove_orphan_files_equals_table_remove_orphan_files(session: Any, tmp_path: Path) -> None:
    maintenance_checks.check_remove_orphan_files_equals_in_process(session, tmp_path)


# ------------------------------------------------------------------- classic, both kinds
@pytest.mark.parametrize(
    "check",
    [
        # a task failing on its first attempt is retried and leaves no extra files
        pytest.param("check_task_failing_on_its_first_attempt", id="task-retried"),
        # a driver killed before the commit leaves only orphans
        pytest.param("check_driver_killed_before_the_commit", id="driver-killed",
                     marks=pytest.mark.slow),
        # refusals come before any job
        pytest.param("check_refusals_before_any_job", id="refusals"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("kind", ["append", "primary-key"])
@CLASSIC
def test_classic_session_case(session: Any, tmp_path: Path, kind: str, check: str) -> None:
    """The cases that need task retries or a killable driver, by their check's name."""
    getattr(checks(kind), check)(session, tmp_path)


# --------------------------------------------------------------- classic, primary-key tables
@CLASSIC
def test_buckets_below_the_bar_are_rewritten_on_the_driver(
    session: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon's split: large buckets on the executors, small ones here; one commit."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    local, remote, model = pk_maintenance_checks.seeded_twins(catalog)
    big = [r for r in make_rows(10_000, 3_000, seed=9) if r["month"] == 1]
    for table in (local, remote):  # month 1's buckets grow far beyond the others
        write_and_commit(table, to_table(big), commit_user="seed")
    model.apply(big)
    plan = MergeTreeCompactPlanner(remote).plan()
    sizes = sorted(sum(f.file_size_bytes for f in t.files) for t in plan.tasks)
    assert len(sizes) == 6 and sizes[3] < sizes[4]  # two large buckets (month 1)
    bar = (sizes[3] + sizes[4]) // 2
    expected = local.compact()
    with caplog.at_level(logging.INFO, logger="snaplake.spark.maintenance"):
        job = remote.file_store().new_compaction(commit=maintenance_committer(remote))
        result = run_compaction(session, remote, job, job.plan_units(), local_below_bytes=bar)
    assert "spark compaction of db.remote: 2 task(s)" in caplog.text
    assert_compacted_like_twin(result, expected, remote, local, model)


@CLASSIC
def test_a_lost_conflict_deletes_the_outputs_never_an_upgraded_input(
    session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another compaction of the same buckets commits between plan and commit: Spark's loses."""
    from snaplake.compaction.job import CompactionJob
    from snaplake.errors import CommitConflictError

    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = pk_maintenance_checks.create(catalog, "db.t", **{"target-file-size": "1 kb"})
    model = TableModel(engine_model("deduplicate"))
    for start in (0, 300, 30):  # month 1 only; the second write stays alone: upgraded
        rows = [r for r in make_rows(start, 60) if r["month"] == 1]
        write_and_commit(table, to_table(rows))
        model.apply(rows)
    seen: list[Any] = []
    commit = CompactionJob.commit_rewritten

    def race(self: Any, plan: Any, messages: Any, *, started: Any = None) -> Any:
        if not seen:  # Spark's job; the other compaction's commit_rewritten runs unchanged
            seen.extend(messages)
            table.compact(full=True)  # the other compaction wins
        return commit(self, plan, messages, started=started)

    monkeypatch.setattr(CompactionJob, "commit_rewritten", race)
    with pytest.raises(CommitConflictError):
        compact(session, table, full=True)
    before = {f.file_name for m in seen for f in m.compact_increment.compact_before}
    after = {f.file_name for m in seen for f in m.compact_increment.compact_after}
    upgraded, written = before & after, after - before
    assert upgraded and written, "the test needs an upgraded input and a merged output"
    on_disk = data_files(table)
    assert upgraded <= on_disk and not written & on_disk
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert on_disk == live_files(table) | {  # the winner's inputs stay for expiry
        f.file_name for s in table.new_scan(snapshot_id=3).plan() for f in s.files
    }


@CLASSIC
def test_compact_assigns_a_postpone_tables_pending_rows(session: Any, tmp_path: Path) -> None:
    """Twin postpone-bucket tables (bucket = -2): Spark's compaction equals Table.compact()."""
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    twins = [
        pk_maintenance_checks.create(
            catalog, name, **{"bucket": "-2", "postpone.default-bucket-num": "2"}
        )
        for name in ("db.local", "db.remote")
    ]
    model = TableModel(engine_model("deduplicate"))
    for i in range(3):
        rows = make_rows(i * 20, 40, seed=i)
        for table in twins:
            write_and_commit(table, to_table(rows), commit_identifier=i)
        model.apply(rows)
    local, remote = twins
    expected = local.compact()
    result = compact(session, "db.remote", warehouse=str(wh))
    assert result.snapshot_id is not None and expected.snapshot_id is not None
    assert result.files_before == expected.files_before
    assert sorted_rows(remote.to_arrow()) == sorted_rows(local.to_arrow()) == model.rows()
    assert {(s.bucket, s.total_buckets) for s in remote.new_scan().plan()} == {(0, 2), (1, 2)}
    assert pk_maintenance_checks.pypaimon_rows(wh, "db.remote") == model.rows()


@CLASSIC
@requires_paimon
def test_spark_compaction_writes_deletion_vectors(session: Any, tmp_path: Path) -> None:
    """``snaplake.spark.compact`` runs the lookup compaction: pypaimon then reads the model."""
    from tests.oracle import PaimonOracle
    from tests.pk_helpers import PK_KEYS, PK_SCHEMA

    wh = tmp_path / "wh"
    table = snaplake.FileSystemCatalog(str(wh)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "2", "deletion-vectors.enabled": "true", "write-only": "true"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    oracle = PaimonOracle(wh)
    for first, seed in ((0, 0), (10, 1)):
        rows = make_rows(first, 40, seed=seed)
        write_and_commit(table, to_table(rows))
        model.apply(rows)
        assert compact(session, "db.t", warehouse=str(wh)).snapshot_id is not None
        got = oracle.read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
        assert sorted_rows(got) == model.rows()
    latest = table.latest_snapshot()
    assert latest is not None and latest.index_manifest  # the second compaction wrote vectors
