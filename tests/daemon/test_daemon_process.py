"""The daemon as a real process: an end-to-end run (600 commits, about half a minute) scraped by
a real Prometheus, SIGTERM during a compaction, two daemons on one warehouse, a corrupt table.

One daemon + writer + Prometheus run (the module fixture ``soak``) serves the end-to-end
assertions, the PromQL evaluation of every dashboard expression and ``promtool check metrics``.
No verdict depends on the machine's speed: the writer makes a fixed number of commits, the
fixture waits (by polling) until the daemon has caught up and recorded its last runs, and the
assertions are about that final state and exact counts, not about how far behind the daemon
fell while the writer ran (on a loaded machine the job threads, at niceness 10, may).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from tests.daemon.procs import (
    Proc,
    daemon_config,
    free_port,
    http_get,
    log_events,
    promql,
    sample_value,
    scrape,
    start_daemon,
    start_daemon_file,
    start_prometheus,
    start_writer,
    wait_for,
    writer_summary,
)
from tests.daemon.promql import expressions, load_dashboard, substitute
from tests.helpers import create_table, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.compaction.maintenance import count_manifests
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.store.lease import TableLease
from snaplake.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("payload", pa.string()),
    ]
)
E2E_OPTIONS = {
    "manifest.merge-min-count": "10",
    "target-file-size": "1 mb",
    "compaction.min.file-num": "5",
    "snapshot.num-retained.min": "5",
    "snapshot.num-retained.max": "20",
    "snapshot.time-retained": "10 s",
}
WRITE_COMMITS = 600  # at most 20 commits/s: about 30 s on a quiet machine
_TTL = timedelta(seconds=10)


def _create(warehouse: Path, name: str, options: dict[str, str]) -> Table:
    return create_table(warehouse, name, schema=SCHEMA, partition_keys=["month"], options=options)


def _append(table: Table, start: int, count: int, *, user: str = "seed", ident: int = 1) -> None:
    data = pa.table(
        {
            "id": pa.array(range(start, start + count), pa.int64()),
            "month": pa.array([1 + i % 2 for i in range(count)], pa.int32()),
            "payload": pa.array([f"seed-{i}" for i in range(count)]),
        },
        schema=SCHEMA,
    )
    write_and_commit(table, data, commit_user=user, commit_identifier=ident)


class Sampler(threading.Thread):
    """Samples the manifests and retained snapshots of a table every 0.5 s (own reader)."""

    def __init__(self, table: Table) -> None:
        super().__init__(daemon=True)
        self.table = table
        self.samples: list[tuple[float, int, int, int]] = []  # time, manifests, retained, latest
        self.stop_event = threading.Event()

    def run(self) -> None:
        sm = self.table.snapshot_manager
        while not self.stop_event.wait(0.5):
            try:
                # earliest first: an expiry between the two reads can only make the
                # computed retained count larger than it was, never smaller than the minimum
                earliest = sm.earliest_snapshot_id()
                latest = sm.latest_snapshot()
                if latest is None or earliest is None:
                    continue
                manifests = count_manifests(self.table, latest)
                self.samples.append((time.time(), manifests, latest.id - earliest + 1, latest.id))
            except (FileNotFoundError, snaplake.SnapshotNotFoundError):
                continue  # expired between two reads


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("soak")
    warehouse = work / "wh"
    events = _create(warehouse, "db.events", E2E_OPTIONS)
    idle = _create(warehouse, "db.idle", {"manifest.merge-min-count": "3"})
    for i in range(4):
        _append(idle, i * 10, 10, ident=i + 1)
    # A primary-key table (the sorted-run panels): 6 upsert commits = 6 level-0 runs per bucket.
    upserts = create_table(
        warehouse, "db.upserts", schema=SCHEMA, partition_keys=["month"],
        primary_keys=["id", "month"], bucket=2,
    )  # fmt: skip
    for i in range(6):
        _append(upserts, i * 5, 20, ident=i + 1)
    # Partitions all past partition.expiration-time (the "Partitions expired" panel).
    expiring = _create(warehouse, "db.expiring", {
        "partition.expiration-time": "1 d", "partition.timestamp-pattern": "2000-$month-01",
        "partition.timestamp-formatter": "yyyy-M-dd"})  # fmt: skip
    _append(expiring, 0, 10)
    daemon_port, writer_port = free_port(), free_port()
    procs: list[Proc] = []
    out: dict[str, Any] = {"work": work, "warehouse": warehouse}
    try:
        prom = start_prometheus(work, daemon_ports=[daemon_port], writer_ports=[writer_port])
        procs.append(prom)
        daemon = start_daemon(
            daemon_config(warehouse, daemon_id="soak", port=daemon_port, log_level="INFO"),
            work, "daemon", daemon_port,
        )  # fmt: skip
        procs.append(daemon)
        # Start writing only once the watcher tails db.events (history is not replayed).
        wait_for(lambda: sample_value(scrape(daemon_port), "snaplake_snapshot_latest_id",
                                      table="db.events") is not None,
                 timeout=20, what="the first watch of db.events")  # fmt: skip
        sampler = Sampler(events)
        sampler.start()
        writer = start_writer(warehouse, "db.events", work, seconds=3600, commits=WRITE_COMMITS,
                              interval_s=0.05, metrics_port=writer_port, hold=True)  # fmt: skip
        procs.append(writer)
        wait_for(lambda: "DONE" in writer.text() or not writer.alive(),
                 timeout=600, what="the writer to finish")  # fmt: skip
        out["writer_summary"] = writer_summary(work)
        # Every dashboard expression, evaluated by Prometheus while everything still runs.
        out["promql"] = {
            (title, expr): promql(prom, substitute(expr)) for title, expr in expressions(
                load_dashboard())
        }  # fmt: skip
        out["exposition"] = scrape(daemon_port)
        # The daemon catches up: small files compacted, manifests merged, snapshots expired.
        # Each wait polls for a state the daemon must reach however long it took to fall
        # behind; the generous timeouts only stop a broken daemon from hanging the suite.
        sm = events.snapshot_manager

        def metric(name: str, table: str = "db.events", **labels: str) -> float:
            return sample_value(scrape(daemon_port), name, table=table, **labels) or 0.0

        def live_files() -> int:
            while True:
                metadata_cache.clear()
                try:
                    return sum(len(split.files) for split in events.new_scan().plan())
                except (FileNotFoundError, snaplake.SnapshotNotFoundError):
                    continue  # the snapshot expired while it was read: read the new latest

        wait_for(lambda: live_files() <= 2 * 5, timeout=300,
                 what="the last small files to be compacted")  # fmt: skip
        threshold = int(E2E_OPTIONS["manifest.merge-min-count"])
        limit = int(E2E_OPTIONS["snapshot.num-retained.max"])
        wait_for(
            lambda: bool(sampler.samples) and sampler.samples[-1][1] < threshold
            and sampler.samples[-1][2] <= limit,
            timeout=300, what="the last manifests to be merged and snapshots expired",
        )  # fmt: skip
        sampler.stop_event.set()
        sampler.join()
        out["samples"] = sampler.samples
        written = 2 * out["writer_summary"]["commits"]  # one file per month partition
        wait_for(
            lambda: metric("snaplake_files_compacted_total") >= written - live_files(),
            timeout=300, what="every compaction to be counted",
        )  # fmt: skip
        # Expiry goes on down to snapshot.num-retained.min once snapshots are 10 s old; then
        # every snapshot before the earliest retained one was expired (and counted) by it.
        wait_for(
            lambda: metric("snaplake_snapshots_expired_total")
            == (sm.earliest_snapshot_id() or 1) - 1,
            timeout=300, what="every expired snapshot to be counted",
        )  # fmt: skip
        wait_for(lambda: metric("snaplake_manifests_merged_total") > 0, timeout=300,
                 what="a manifest merge to be counted")  # fmt: skip
        wait_for(lambda: 0 < metric("snaplake_manifest_files", "db.idle") < 3, timeout=300,
                 what="db.idle's manifests to be merged")  # fmt: skip
        # The tailer has read every snapshot up to the latest (seen, or counted as missed).
        wait_for(lambda: metric("snaplake_snapshot_latest_id") == sm.latest_snapshot_id(),
                 timeout=300, what="the daemon to tail the last snapshot")  # fmt: skip
        out["live_files"] = live_files()
        out["earliest_id"] = sm.earliest_snapshot_id()
        out["final_exposition"] = scrape(daemon_port)
        out["writer_exit"] = writer.stop()
        out["daemon_exit"] = daemon.stop(signal.SIGTERM)
        out["daemon_log"] = daemon.text()
        out["writer_log"] = writer.text()
        out["events"] = events
        return out
    finally:
        for p in procs:
            if p.alive():
                p.stop(signal.SIGTERM, timeout=10)
        keep = os.environ.get("SNAPLAKE_KEEP_SOAK")
        if keep:
            shutil.copytree(work, keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("wh"))


def test_e2e_writer_never_fails_and_rows_are_exact(soak):
    summary = soak["writer_summary"]
    assert summary["failures"] == [], soak["writer_log"][-3000:]
    assert soak["writer_exit"][0] == 0
    assert summary["commits"] == WRITE_COMMITS
    expected = list(range(summary["commits"] * summary["rows_per_commit"]))
    metadata_cache.clear()
    table = snaplake.FileSystemCatalog(str(soak["warehouse"])).get_table("db.events")
    assert sorted(table.to_arrow(columns=["id"]).column("id").to_pylist()) == expected


@requires_paimon
def test_e2e_pypaimon_reads_the_maintained_table(soak):
    summary = soak["writer_summary"]
    rows = PaimonOracle(soak["warehouse"]).read("db.events")
    assert sorted(rows.column("id").to_pylist()) == list(
        range(summary["commits"] * summary["rows_per_commit"])
    )


def test_e2e_manifests_are_merged_below_the_threshold(soak):
    """How far the manifests grew while the writer ran depends on how much CPU the daemon's
    job threads got; that the daemon merges them back below the threshold does not."""
    samples = soak["samples"]
    assert samples
    threshold = int(E2E_OPTIONS["manifest.merge-min-count"])
    assert samples[-1][1] < threshold
    merged = sample_value(soak["final_exposition"], "snaplake_manifests_merged_total",
                          table="db.events")  # fmt: skip
    assert merged and merged > 0


def test_e2e_snapshots_stay_within_retention(soak):
    least = int(E2E_OPTIONS["snapshot.num-retained.min"])
    assert soak["samples"][-1][2] <= int(E2E_OPTIONS["snapshot.num-retained.max"])
    # Expiry never goes below the minimum (each sample reads the earliest id first).
    assert all(r >= least for _, _, r, latest in soak["samples"] if latest >= least)
    expired = sample_value(soak["final_exposition"], "snaplake_snapshots_expired_total",
                           table="db.events")  # fmt: skip
    assert expired is not None
    assert expired == soak["earliest_id"] - 1  # every snapshot before it, counted once
    assert expired > WRITE_COMMITS - int(E2E_OPTIONS["snapshot.num-retained.max"])


def test_e2e_small_files_get_compacted(soak):
    final = soak["final_exposition"]
    compacted = sample_value(final, "snaplake_files_compacted_total", table="db.events")
    written = 2 * soak["writer_summary"]["commits"]  # one file per month partition per commit
    assert compacted is not None
    assert compacted >= written - soak["live_files"]
    assert soak["live_files"] <= 2 * int(E2E_OPTIONS["compaction.min.file-num"])
    deleted = sample_value(final, "snaplake_files_deleted_total", table="db.events",
                           file_type="data")  # fmt: skip
    assert deleted and deleted > 0  # expiry removed the compacted inputs


def test_e2e_daemon_exports_table_metrics_for_an_unscraped_writer(soak):
    final = soak["final_exposition"]
    commits = sample_value(final, "snaplake_table_commits_total", table="db.events", kind="APPEND")
    missed = sample_value(final, "snaplake_table_snapshots_missed_total", table="db.events")
    # The daemon saw the writer's commits by tailing snapshots: each one is counted, or was
    # expired before the watcher read it and is counted as missed (possible only when the
    # watcher falls more than snapshot.num-retained.max commits behind).
    assert commits is not None and missed is not None
    assert commits <= soak["writer_summary"]["commits"]
    assert commits + missed >= soak["writer_summary"]["commits"]
    hist = sample_value(final, "snaplake_table_commit_duration_seconds_count", table="db.events",
                        kind="APPEND")  # fmt: skip
    assert hist == commits
    assert sample_value(final, "snaplake_table_lease_held", table="db.idle") == 1
    assert (sample_value(final, "snaplake_manifest_files", table="db.idle") or 99) < 3


def test_e2e_sigterm_exits_zero_and_releases_leases(soak):
    code, _ = soak["daemon_exit"]
    assert code == 0, soak["daemon_log"][-3000:]
    for name in ("db.events", "db.idle"):
        table = snaplake.FileSystemCatalog(str(soak["warehouse"])).get_table(name)
        state = TableLease(file_io=table.file_io, table_root=table.root, owner="probe",
                           ttl=_TTL).current()  # fmt: skip
        assert state is not None
        assert state.released
    assert "Traceback" not in soak["daemon_log"]


def test_promql_every_dashboard_expression_returns_data(soak):
    empty = [f"{title}: {expr}" for (title, expr), result in soak["promql"].items() if not result]
    assert not empty, "\n".join(empty)


def test_promtool_check_metrics_passes_on_the_daemon_exposition(soak):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed (make prometheus)"
    result = subprocess.run([promtool, "check", "metrics"], input=soak["exposition"],
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- shutdown


def _compactable_table(warehouse: Path, *, files: int, rows: int) -> Table:
    """A table whose single bucket holds ``files`` small files (one compaction makes one file)."""
    table = _create(
        warehouse, "db.big",
        {"target-file-size": "512 mb", "compaction.min.file-num": "5", "bucket": "1",
         "bucket-key": "id", "manifest.merge-min-count": "1000"},
    )  # fmt: skip
    rng = np.random.default_rng(7)
    committer = table.new_commit(commit_user="seed")
    for i in range(files):
        ids = np.arange(i * rows, (i + 1) * rows, dtype=np.int64)
        payload = rng.integers(0, 2**62, size=rows).astype(str)
        data = pa.table({"id": ids, "month": np.ones(rows, dtype=np.int32), "payload": payload},
                        schema=SCHEMA)  # fmt: skip
        write_and_commit(
            table, data, commit_user="seed", commit_identifier=i + 1, committer=committer
        )
    return table


@pytest.fixture(scope="module")
def compactable_warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    base = tmp_path_factory.mktemp("compactable")
    files, rows = 8, 10_000
    _compactable_table(base / "template", files=files, rows=rows)
    return base / "template", files * rows


@pytest.mark.parametrize("grace", ["10 min", "0 s"], ids=["grace", "no-grace"])
def test_sigterm_during_compaction(tmp_path, compactable_warehouse, grace):
    """SIGTERM while a compaction runs: exit 0, table consistent, lease released.

    The compaction waits at the daemon's test gate (``SNAPLAKE_DAEMON_TEST_GATE``) until
    SIGTERM has been received, so the verdict never depends on how fast the machine
    compacts. With a grace period (longer than any compaction here) the daemon waits for
    the running compaction, which is published; with none it is abandoned (nothing
    published; files it wrote would be orphans for orphan clean).
    """
    template, total_rows = compactable_warehouse
    warehouse = tmp_path / "wh"
    shutil.copytree(template, warehouse)
    gate = tmp_path / "gate"
    gate.mkdir()
    hold = gate / "compact@db.big.hold"
    hold.touch()
    port = free_port()
    daemon = start_daemon(
        daemon_config(warehouse, daemon_id="term", port=port, grace=grace,
                      intervals={"compact": "1 s"}),
        tmp_path, "daemon", port, env={"SNAPLAKE_DAEMON_TEST_GATE": str(gate)},
    )  # fmt: skip
    try:
        wait_for(lambda: (gate / "compact@db.big.waiting").exists() or not daemon.alive(),
                 timeout=60, what="the compaction to start", step=0.05)  # fmt: skip
        daemon.send(signal.SIGTERM)
        wait_for(lambda: "SIGTERM received" in daemon.text() or not daemon.alive(),
                 timeout=60, what="the daemon to receive SIGTERM", step=0.05)  # fmt: skip
        if grace == "0 s":
            code = daemon.popen.wait(timeout=60)  # the compaction is still held at the gate
        else:
            assert daemon.alive(), daemon.text()[-3000:]  # waiting for the running compaction
            hold.unlink()
            code = daemon.popen.wait(timeout=120)
    finally:
        daemon.stop(signal.SIGKILL)
    log = daemon.text()
    assert code == 0, log[-3000:]
    metadata_cache.clear()
    table = snaplake.FileSystemCatalog(str(warehouse)).get_table("db.big")
    ids = table.to_arrow(columns=["id"]).column("id").to_numpy()
    assert len(ids) == total_rows
    assert (ids == np.arange(total_rows)).all()  # one bucket: order kept by compaction
    kinds = [s.commit_kind.value for s in table.snapshots()]
    if grace == "0 s":
        assert "aborting" in log
        assert kinds.count("COMPACT") == 0
    else:
        assert "aborting" not in log
        assert kinds[-1] == "COMPACT", log[-3000:]
        assert len(table.new_scan().plan()[0].files) == 1
    lease = TableLease(file_io=table.file_io, table_root=table.root, owner="probe", ttl=_TTL)
    state = lease.current()
    assert state is not None
    assert state.released
    assert lease.try_acquire()  # another daemon may take over at once


# ----------------------------------------------------------------------- two daemons
def _maintained_by(log: str) -> dict[str, list[float]]:
    """table -> start times of maintenance tasks in a daemon's DEBUG log."""
    out: dict[str, list[float]] = {}
    for ts, m in log_events(log, r"^(manifest_merge|compact|expire_snapshots) of (\S+) started"):
        out.setdefault(m.group(2), []).append(ts)
    return out


def test_two_daemons_never_maintain_one_table_at_once(tmp_path):
    warehouse = tmp_path / "wh"
    names = [f"db.t{i}" for i in range(6)]
    for k, name in enumerate(names):
        table = _create(warehouse, name, {"manifest.merge-min-count": "3"})
        for i in range(3):
            _append(table, 1000 * k + 10 * i, 10, ident=i + 1)
    ports = [free_port(), free_port()]
    cfgs = [
        daemon_config(warehouse, daemon_id=f"d{i}", port=ports[i], lease_ttl="4 s",
                      lease_renew="1 s")
        for i in range(2)
    ]  # fmt: skip
    a = start_daemon(cfgs[0], tmp_path, "a", ports[0])
    b = start_daemon(cfgs[1], tmp_path, "b", ports[1])
    try:

        def leases() -> dict[int, set[str]]:
            out = {}
            for port in ports:
                body = scrape(port)
                out[port] = {n for n in names if sample_value(body, "snaplake_table_lease_held",
                                                              table=n) == 1}  # fmt: skip
            return out

        def settled() -> bool:
            maintained = set(_maintained_by(a.text())) | set(_maintained_by(b.text()))
            return set().union(*leases().values()) == set(names) and maintained == set(names)

        wait_for(settled, timeout=30, what="every table leased and maintained by a daemon")
        held = leases()
        assert held[ports[0]].isdisjoint(held[ports[1]])
        assert held[ports[0]] | held[ports[1]] == set(names)
        by_a, by_b = _maintained_by(a.text()), _maintained_by(b.text())
        assert set(by_a).isdisjoint(by_b), (by_a.keys(), by_b.keys())
        assert set(by_a) | set(by_b) == set(names)

        # Daemon a crashes; b takes its tables over after the lease expires.
        a.stop(signal.SIGKILL)
        crashed_at = time.time()
        catalog = snaplake.FileSystemCatalog(str(warehouse))

        def lease_of(name: str) -> Any:
            t = catalog.get_table(name)
            return TableLease(file_io=t.file_io, table_root=t.root, owner="probe",
                              ttl=_TTL).current()  # fmt: skip

        left_by_a = {n: lease_of(n) for n in held[ports[0]]}  # a is dead: final
        wait_for(
            lambda: all(sample_value(scrape(ports[1]), "snaplake_table_lease_held", table=n) == 1
                        for n in names),
            timeout=20, what="daemon b to take over every table",
        )  # fmt: skip
        wait_for(
            lambda: all(max(_maintained_by(b.text()).get(n, [0.0])) > crashed_at
                        for n in held[ports[0]]),
            timeout=20, what="daemon b to maintain a's tables",
        )  # fmt: skip
        by_b = _maintained_by(b.text())
        assert set(by_b) == set(names)
        for n in held[ports[0]]:
            # b never worked on a's tables before a was gone and the lease had expired.
            assert min(by_b[n]) > crashed_at, n
        for n, old in left_by_a.items():  # not before a's lease (4 s TTL) ran out
            new = lease_of(n)
            assert (new.owner, new.generation) == ("d1", old.generation + 1)
            assert new.acquired_ms > old.expires_ms
        code, _ = b.stop(signal.SIGTERM)
        assert code == 0
    finally:
        a.stop(signal.SIGKILL)
        b.stop(signal.SIGKILL)


def test_two_daemons_from_one_config_file_never_share_a_table(tmp_path):
    """A copied config (same [daemon] id): exactly one process maintains the table; the
    other takes it over only once the crashed holder's lease has expired."""
    warehouse = tmp_path / "wh"
    table = _create(warehouse, "db.t", {"manifest.merge-min-count": "3"})
    for i in range(3):
        _append(table, 10 * i, 10, ident=i + 1)
    cfg = tmp_path / "snaplake.toml"
    cfg.write_text(daemon_config(warehouse, daemon_id="copied", port=0, lease_ttl="4 s",
                                 lease_renew="1 s"))  # fmt: skip
    probe = TableLease(file_io=table.file_io, table_root=table.root, owner="probe", ttl=_TTL)

    def held(proc: Proc) -> float | None:
        return sample_value(scrape(proc.port), "snaplake_table_lease_held", table="db.t")

    a = start_daemon_file(cfg, tmp_path, "a")
    b: Proc | None = None
    try:
        wait_for(lambda: held(a) == 1, timeout=30, what="daemon a to lease db.t")
        b = start_daemon_file(cfg, tmp_path, "b")  # returns after b's first lease round
        assert held(b) == 0, b.text()[-3000:]
        assert held(a) == 1
        wait_for(lambda: bool(_maintained_by(a.text())), timeout=30, what="a to maintain db.t")
        first = probe.current()
        assert first is not None
        assert (first.owner, first.generation) == ("copied", 1)
        assert f"instance {first.nonce}" in a.text()
        assert "now maintains db.t" not in b.text()
        assert "same id 'copied'" in b.text()  # b says why it waits

        a.stop(signal.SIGKILL)
        wait_for(lambda: held(b) == 1, timeout=30, what="b to take db.t over")
        second = probe.current()
        assert second is not None
        assert second.generation == 2
        assert second.nonce != first.nonce
        assert f"instance {second.nonce}" in b.text()
        assert second.acquired_ms > first.expires_ms  # only after a's lease expired
        wait_for(lambda: bool(_maintained_by(b.text())), timeout=30, what="b to maintain db.t")
        assert min(_maintained_by(b.text())["db.t"]) * 1000 >= second.acquired_ms - 1
        assert a.text().count("now maintains db.t") == 1
        assert b.text().count("now maintains db.t") == 1
        code, _ = b.stop(signal.SIGTERM)
        assert code == 0, b.text()[-3000:]
    finally:
        a.stop(signal.SIGKILL)
        if b is not None:
            b.stop(signal.SIGKILL)


# -------------------------------------------------------------------- missing table
def test_a_missing_configured_table_is_logged_and_keeps_the_daemon_unready(tmp_path):
    warehouse = tmp_path / "wh"
    _append(_create(warehouse, "cdc.status", {}), 0, 10)
    cfg = tmp_path / "snaplake.toml"
    cfg.write_text(daemon_config(warehouse, daemon_id="typo", port=0,
                                 tables=("cdc.status", "cdc.statuz")))  # fmt: skip
    daemon = start_daemon_file(cfg, tmp_path, "d")
    try:
        status, body = http_get(f"http://127.0.0.1:{daemon.port}/readyz")
        assert status == 503, body
        assert "cdc.statuz (warehouse[0])" in body
        assert "maintaining 1 of 1 table(s)" in body
        assert http_get(f"http://127.0.0.1:{daemon.port}/healthz")[0] == 200
        exposition = scrape(daemon.port)
        assert sample_value(exposition, "snaplake_daemon_missing_tables", table="cdc.statuz") == 1
        assert sample_value(exposition, "snaplake_daemon_missing_tables", table="cdc.status") == 0
        warnings = log_events(daemon.text(), r"table cdc\.statuz does not exist")
        assert warnings, daemon.text()[-3000:]
        assert all(" WARNING " in line for line in daemon.text().splitlines()
                   if "cdc.statuz does not exist" in line)  # fmt: skip

        _append(_create(warehouse, "cdc.statuz", {}), 0, 10)  # found at the next discovery
        wait_for(lambda: http_get(f"http://127.0.0.1:{daemon.port}/readyz")[0] == 200,
                 timeout=60, what="the daemon to find cdc.statuz")  # fmt: skip
        body = http_get(f"http://127.0.0.1:{daemon.port}/readyz")[1]
        assert "maintaining 2 of 2 table(s)" in body
        assert sample_value(scrape(daemon.port), "snaplake_daemon_missing_tables",
                            table="cdc.statuz") == 0  # fmt: skip
        code, _ = daemon.stop(signal.SIGTERM)
        assert code == 0
    finally:
        daemon.stop(signal.SIGKILL)


# -------------------------------------------------------------------- failing table
def test_a_corrupt_table_does_not_stop_the_others(tmp_path):
    warehouse = tmp_path / "wh"
    good = _create(warehouse, "db.good", {"manifest.merge-min-count": "3"})
    bad = _create(warehouse, "db.bad", {"manifest.merge-min-count": "3"})
    for i in range(4):
        _append(good, 10 * i, 10, ident=i + 1)
        _append(bad, 10 * i, 10, ident=i + 1)
    latest = bad.latest_snapshot()
    assert latest is not None
    from snaplake.store.format.manifest_list import read_manifest_list

    metas = read_manifest_list(bad.file_io, bad.paths.manifest_path(latest.delta_manifest_list))
    Path(bad.paths.manifest_path(metas[0].file_name)).write_bytes(b"not an avro file")

    port = free_port()
    daemon = start_daemon(daemon_config(warehouse, daemon_id="c", port=port), tmp_path, "d", port)
    try:

        def failures() -> float:
            return sample_value(scrape(port), "snaplake_maintenance_runs_total", table="db.bad",
                                outcome="failure") or 0.0  # fmt: skip

        wait_for(lambda: failures() >= 2, timeout=20, what="failures of db.bad to be counted")
        first = failures()
        wait_for(
            lambda: (sample_value(scrape(port), "snaplake_manifests_merged_total",
                                  table="db.good") or 0) > 0,
            timeout=10, what="db.good to be merged",
        )  # fmt: skip
        # db.good keeps being maintained while db.bad keeps failing.
        writer = start_writer(
            warehouse, "db.good", tmp_path, seconds=3600, commits=40, interval_s=0.1
        )
        assert writer.popen.wait(timeout=30) == 0
        wait_for(lambda: failures() > first, timeout=10, what="the failure metric to rise")
        wait_for(
            lambda: (sample_value(scrape(port), "snaplake_manifest_files", table="db.good")
                     or 99) < 3,
            timeout=10, what="db.good's new manifests to be merged",
        )  # fmt: skip
        body = scrape(port)
        assert sample_value(body, "snaplake_maintenance_failures_total", table="db.bad",
                            error="CorruptMetadataError")  # fmt: skip
        assert http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        log = daemon.text()
        assert "of db.bad failed" in log
        assert "CorruptMetadataError" in log
        code, _ = daemon.stop(signal.SIGTERM)
        assert code == 0
    finally:
        daemon.stop(signal.SIGKILL)
