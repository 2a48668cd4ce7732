"""HTTP requests, bytes and latency of one append commit on S3, by table history (SeaweedFS).

Usage: python benchmarks/s3_requests.py [--histories 1,100,1000] [--commits 20]

Starts ``weed mini`` on 127.0.0.1 (tests/s3_servers.py). For each history length N it
builds a table of N snapshots (one-row appends by one committer), then measures
single-file, one-row appends:

- requests: botocore's ``before-send`` hook counts every HTTP request boto3 sends (retries
  included) by operation, with the request body bytes; ``after-call`` adds the response
  bytes (``Content-Length`` of GETs; HEADs carry none). Data files are written by pyarrow's
  S3 filesystem, which bypasses botocore: those requests are counted by a pass-through
  proxy (``FaultProxy`` with no rules) that every request of the counting runs goes
  through; pyarrow's count = proxy count - botocore count.
- "steady" = the committer that published the latest snapshot commits again (it probes
  ``snapshot-(N+1)`` and reuses its manifest-list bytes); "cold" = a new committer
  (``table.new_commit``) on a FileIO that already verified the bucket reads LATEST, the
  snapshot (that read is also its existence check), probes ``snapshot-(N+1)`` and reads
  both manifest lists first; "new process" = a cold committer on a fresh FileIO (no client,
  bucket not verified), which also checks conditional writes once: its new manifest is
  put a second time and must be refused with 412.
- latency: ``commit()`` wall time (p50/p99/mean) and the data-file write
  (``prepare_commit``) separately, straight to SeaweedFS (no proxy), steady state.

Target (issue 3): at most 6 requests per steady-state commit, independent of history:
HEAD snapshot-(N+1), PUT manifest, PUT base list, PUT delta list, PUT snapshot (If-None-Match),
PUT LATEST. The base list's bytes grow with the number of manifests (the commit path
never merges; the maintenance daemon does). A cold commit adds 4 reads (GET LATEST,
snapshot-N, base and delta list), a new process 1 request more (the second manifest PUT).
"""

from __future__ import annotations

import argparse
import collections
import os
import threading
import time
from dataclasses import dataclass, field

import pyarrow as pa
from _common import summary_ms
from tests.s3_servers import FaultProxy, S3Endpoint, start_seaweedfs

import snaplake
from snaplake.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("user", pa.string())])


@dataclass
class Counter:
    """botocore requests by operation, with bytes sent and received."""

    ops: collections.Counter[str] = field(default_factory=collections.Counter)
    sent: int = 0
    received: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, table: Table) -> None:
        events = table.file_io._s3().meta.events  # type: ignore[attr-defined]
        events.register("before-send.s3", self._before_send)
        events.register("after-call.s3", self._after_call)

    def _before_send(self, request, event_name: str, **_kw) -> None:
        body = request.body
        size = len(body) if isinstance(body, bytes | bytearray) else 0
        if body is not None and not isinstance(body, bytes | bytearray):
            size = int(request.headers.get("Content-Length", 0) or 0)
        with self.lock:
            self.ops[event_name.rsplit(".", 1)[-1]] += 1
            self.sent += size

    def _after_call(self, http_response, event_name: str, **_kw) -> None:
        if event_name.endswith("HeadObject"):
            return
        with self.lock:
            self.received += int(http_response.headers.get("content-length", 0) or 0)

    def reset(self) -> None:
        with self.lock:
            self.ops.clear()
            self.sent = self.received = 0


def _rows(i: int) -> pa.Table:
    return pa.table({"id": [i], "user": ["b"]}, schema=SCHEMA)


def _append(table: Table, committer, i: int) -> None:
    write = table.new_write(commit_user="bench")
    write.write_arrow(_rows(i))
    committer.commit(write.prepare_commit(), commit_identifier=i)


def _count_one(table: Table, committer, counter: Counter, proxy: FaultProxy, i: int):
    write = table.new_write(commit_user="bench")
    write.write_arrow(_rows(i))
    counter.reset()
    proxy.requests.clear()
    messages = write.prepare_commit()
    data_boto, data_total = sum(counter.ops.values()), len(proxy.requests)
    counter.reset()
    proxy.requests.clear()
    committer.commit(messages, commit_identifier=i)
    return {
        "data_pyarrow": data_total - data_boto,
        "data_boto": data_boto,
        "commit_ops": dict(counter.ops),
        "commit_requests": sum(counter.ops.values()),
        "commit_proxy": len(proxy.requests),
        "sent": counter.sent,
        "received": counter.received,
    }


def run(endpoint: S3Endpoint, proxy: FaultProxy, *, history: int, commits: int) -> None:
    bucket = endpoint.new_bucket("bench")
    direct = snaplake.FileSystemCatalog(f"s3://{bucket}/wh", options=endpoint.options())
    table = direct.create_table("db.t", schema=SCHEMA)
    builder = table.new_commit(commit_user="bench")
    start = time.perf_counter()
    for i in range(1, history + 1):
        _append(table, builder, i)
    build_s = time.perf_counter() - start
    ident = history

    # Counting runs go through the proxy so pyarrow's data-file requests are seen too.
    proxied = snaplake.FileSystemCatalog(
        f"s3://{bucket}/wh", options=proxy.endpoint(endpoint).options()
    ).get_table("db.t")
    counter = Counter()
    counter.attach(proxied)
    proxied.file_io.write_if_absent(f"s3://{bucket}/warmup", b"x")  # the once-per-bucket probe
    ident += 1
    cold = _count_one(proxied, proxied.new_commit(commit_user="bench"), counter, proxy, ident)
    # A new process: a fresh FileIO (no client yet, bucket not verified) and committer.
    fresh_process = snaplake.FileSystemCatalog(
        f"s3://{bucket}/wh", options=proxy.endpoint(endpoint).options()
    ).get_table("db.t")
    process_counter = Counter()
    process_counter.attach(fresh_process)
    ident += 1
    new_process = _count_one(
        fresh_process,
        fresh_process.new_commit(commit_user="bench"),
        process_counter,
        proxy,
        ident,
    )
    steady_committer = proxied.new_commit(commit_user="bench")
    ident += 1
    _append(proxied, steady_committer, ident)  # now it published the latest itself
    steady = []
    for _ in range(commits):
        ident += 1
        steady.append(_count_one(proxied, steady_committer, counter, proxy, ident))

    # Latency straight to SeaweedFS, steady state.
    fresh = direct.get_table("db.t")
    committer = fresh.new_commit(commit_user="bench")
    ident += 1
    _append(fresh, committer, ident)
    write_s, commit_s = [], []
    for _ in range(commits):
        ident += 1
        write = fresh.new_write(commit_user="bench")
        write.write_arrow(_rows(ident))
        t0 = time.perf_counter()
        messages = write.prepare_commit()
        t1 = time.perf_counter()
        committer.commit(messages, commit_identifier=ident)
        t2 = time.perf_counter()
        write_s.append(t1 - t0)
        commit_s.append(t2 - t1)

    last = steady[-1]
    ops = ", ".join(f"{op} {n}" for op, n in sorted(last["commit_ops"].items()))
    counts = sorted({s["commit_requests"] for s in steady})
    print(f"\n== history {history} snapshots (built in {build_s:.1f} s) ==")
    print(
        f"steady commit: {counts} boto3 requests per commit "
        f"(proxy saw {sorted({s['commit_proxy'] for s in steady})}): {ops}"
    )
    print(f"  bytes: sent {last['sent']:,}  received {last['received']:,}")
    print(
        f"cold commit (new committer): {cold['commit_requests']} requests: "
        + ", ".join(f"{op} {n}" for op, n in sorted(cold["commit_ops"].items()))
        + f"; sent {cold['sent']:,} received {cold['received']:,} bytes"
    )
    print(
        f"new process (fresh FileIO): {new_process['commit_requests']} requests: "
        + ", ".join(f"{op} {n}" for op, n in sorted(new_process["commit_ops"].items()))
        + f"; sent {new_process['sent']:,} received {new_process['received']:,} bytes"
    )
    print(
        f"data file (prepare_commit): {last['data_pyarrow']} pyarrow requests "
        f"(+{last['data_boto']} boto3)"
    )
    print(f"latency commit():      {summary_ms(commit_s)}")
    print(f"latency data file:     {summary_ms(write_s)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--histories", default="1,100,1000")
    parser.add_argument("--commits", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    server = start_seaweedfs()
    proxy = FaultProxy(upstream=server.endpoint.url).start()
    try:
        for history in (int(h) for h in args.histories.split(",")):
            run(server.endpoint, proxy, history=history, commits=args.commits)
    finally:
        proxy.stop()
        server.stop()


if __name__ == "__main__":
    main()
