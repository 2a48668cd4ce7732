"""Soak: a writer committing as fast as it can for 5 minutes while the daemon maintains the table.

Reports the writer's commit latency p50/p99 in the first and the last minute, the table's
manifests and retained snapshots over time, and the daemon's CPU and RSS (from its own
``process_*`` metrics). Targets: last-minute p50 within 1.2x of the first minute (the
daemon keeps the commit path flat), daemon RSS <= 200 MiB.

    .venv/bin/python benchmarks/daemon_soak.py [--duration 300] [--json out.json]

``--duration`` (alias ``--seconds``) shortens the run while iterating. The
daemon's RSS is also split into anonymous and file-backed memory (from its
``/proc/<pid>/status``), and its peak (``VmHWM``) is reported: the 5 s samples
of the metric can miss a short peak during a compaction.

Exit code 0 when both targets are met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
from tests.daemon.procs import (
    daemon_config,
    free_port,
    sample_value,
    scrape,
    start_daemon,
    start_writer,
    wait_for,
    writer_summary,
)

import snaplake
from snaplake.compaction.maintenance import count_manifests

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("payload", pa.string()),
    ]
)
OPTIONS = {
    "manifest.merge-min-count": "30",  # Paimon's default
    "target-file-size": "8 mb",
    "compaction.min.file-num": "5",
    "snapshot.num-retained.min": "10",
    "snapshot.num-retained.max": "100",
    "snapshot.time-retained": "1 min",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def proc_status(pid: int) -> dict[str, float]:
    """``VmRSS``, ``VmHWM``, ``RssAnon``, ``RssFile`` of ``pid`` in MiB, ``Threads``."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[key] = int(value.split()[0]) / 1024
                elif key == "Threads":
                    out[key] = int(value)
    except OSError:  # not Linux, or the daemon exited
        pass
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--duration", "--seconds", dest="seconds", type=float, default=300.0)
    p.add_argument("--json", default="")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="snaplake-soak-"))
    warehouse = work / "wh"
    table = snaplake.FileSystemCatalog(str(warehouse)).create_table(
        "db.soak", schema=SCHEMA, partition_keys=["month"], options=OPTIONS
    )
    port = free_port()
    daemon = start_daemon(
        daemon_config(warehouse, daemon_id="soak", port=port, log_level="INFO",
                      files_interval="30 s",
                      intervals={"manifest_merge": "2 s", "compact": "10 s",
                                 "expire_snapshots": "5 s", "watch": "5 s"}),
        work, "daemon", port,
    )  # fmt: skip
    samples: list[dict[str, float]] = []
    stop = threading.Event()

    def sample() -> None:
        sm = table.snapshot_manager
        start = time.time()
        while not stop.wait(5.0):
            try:
                latest = sm.latest_snapshot()
                earliest = sm.earliest_snapshot_id()
                body = scrape(port)
                status = proc_status(daemon.pid)
                samples.append(
                    {
                        "t_s": round(time.time() - start, 1),
                        "snapshot_id": latest.id if latest else 0,
                        "manifests": count_manifests(table, latest),
                        "snapshots_retained": (latest.id - earliest + 1)
                        if latest and earliest
                        else 0,
                        "daemon_rss_mib": (sample_value(body, "process_resident_memory_bytes")
                                           or 0) / 2**20,
                        "daemon_cpu_s": sample_value(body, "process_cpu_seconds_total") or 0.0,
                        "daemon_anon_mib": status.get("RssAnon", 0.0),
                        "daemon_file_mib": status.get("RssFile", 0.0),
                        "daemon_hwm_mib": status.get("VmHWM", 0.0),
                        "daemon_threads": status.get("Threads", 0.0),
                        "data_files": sample_value(body, "snaplake_data_files", table="db.soak")
                        or 0.0,
                    }
                )  # fmt: skip
            except (FileNotFoundError, snaplake.SnapshotNotFoundError):
                continue

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    writer = start_writer(warehouse, "db.soak", work, seconds=args.seconds, rows=100)
    wait_for(lambda: not writer.alive(), timeout=args.seconds + 120, what="the writer")
    stop.set()
    sampler.join()
    summary = writer_summary(work)
    peak_rss = proc_status(daemon.pid).get("VmHWM", 0.0)
    code, _ = daemon.stop(signal.SIGTERM)

    times, lat = summary["times_s"], summary["latencies_s"]
    end = times[-1] if times else 0.0
    first = [d for t, d in zip(times, lat, strict=True) if t <= 60]
    last = [d for t, d in zip(times, lat, strict=True) if t >= end - 60]
    p50_first, p50_last = statistics.median(first), statistics.median(last)
    cpu = [s["daemon_cpu_s"] for s in samples]
    report = {
        "seconds": args.seconds,
        "commits": summary["commits"],
        "failures": len(summary["failures"]),
        "commits_per_s": summary["commits"] / max(end, 1e-9),
        "first_minute": {"commits": len(first), "p50_ms": p50_first * 1000,
                         "p99_ms": percentile(first, 0.99) * 1000},
        "last_minute": {"commits": len(last), "p50_ms": p50_last * 1000,
                        "p99_ms": percentile(last, 0.99) * 1000},
        "p50_ratio_last_vs_first": p50_last / p50_first,
        "max_manifests": max((s["manifests"] for s in samples), default=0),
        "max_snapshots_retained": max((s["snapshots_retained"] for s in samples), default=0),
        "daemon_max_rss_mib": max((s["daemon_rss_mib"] for s in samples), default=0),
        "daemon_peak_rss_mib": peak_rss,
        "daemon_cpu_percent": 100 * (cpu[-1] - cpu[0]) / (samples[-1]["t_s"] - samples[0]["t_s"])
        if len(cpu) > 1 else 0.0,
        "daemon_exit_code": code,
        "samples": samples,
    }  # fmt: skip
    print(f"writer: {report['commits']} commits in {end:.0f} s "
          f"({report['commits_per_s']:.1f}/s), {report['failures']} failed")  # fmt: skip
    for name in ("first_minute", "last_minute"):
        m = report[name]
        print(f"  {name:12s}: {m['commits']:5d} commits, p50 {m['p50_ms']:6.1f} ms, "
              f"p99 {m['p99_ms']:6.1f} ms")  # fmt: skip
    print(f"  last/first p50 ratio: {report['p50_ratio_last_vs_first']:.2f} (target <= 1.2)")
    print("  t(s)  snapshot  manifests  retained  data_files  daemon_rss_MiB (anon+file)"
          "  threads  daemon_cpu_s")  # fmt: skip
    for s in samples[:: max(1, len(samples) // 20)]:
        print(f"  {s['t_s']:5.0f} {s['snapshot_id']:9.0f} {s['manifests']:10.0f} "
              f"{s['snapshots_retained']:9.0f} {s['data_files']:11.0f} "
              f"{s['daemon_rss_mib']:9.1f} "
              f"({s['daemon_anon_mib']:5.1f}+{s['daemon_file_mib']:5.1f})"
              f" {s['daemon_threads']:8.0f} {s['daemon_cpu_s']:13.1f}")  # fmt: skip
    print(f"daemon: max RSS {report['daemon_max_rss_mib']:.1f} MiB sampled, "
          f"{peak_rss:.1f} MiB peak (VmHWM) (target <= 200), "
          f"CPU {report['daemon_cpu_percent']:.1f}% of one core, exit code {code}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    ok = (
        report["p50_ratio_last_vs_first"] <= 1.2
        and max(report["daemon_max_rss_mib"], peak_rss) <= 200
        and report["failures"] == 0
        and code == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
