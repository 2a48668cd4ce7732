"""Replaying spec/commit.qnt traces against the implementation, one process per spec actor.

:func:`traces` asks ``quint run --main replayable --out-itf`` for traces. :class:`Replay`
starts a long-lived worker process (``python -m tests.spec.replay <uri> <table>``) for each
actor of the spec — the writers w1..w3, the compactors c1 and c2, maintenance (expiry, orphan clean,
tags, the consumer) and the reader — each with its own table handle, and drives them step by
step over a pipe (one JSON line each way): the store sees concurrent handles with files
written and not yet committed, commits of unknown outcome, cleaned files. After every step
:meth:`Replay.compare` checks, from the test's own handle, that the table holds the spec's
state: retained snapshot ids, rows of every retained snapshot and tag, the tags, the
consumer, the exactly-once map of the latest snapshot, and for every data file the spec
knows whether it exists.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from tests.spec.quint_cli import QUINT, ROOT, SPEC

SCHEMA = pa.schema([("row", pa.int64())])
OPTIONS = {
    "snapshot.num-retained.min": "1",
    "snapshot.num-retained.max": "2",  # the spec's RETAIN
    "snapshot.time-retained": "1000 d",
    "commit.max-retries": "0",  # the spec's lost races never reach the store here
}
GRACE = 2  # the spec's GRACE (replayable module)
WRITERS = ("w1", "w2", "w3")
COMPACTORS = ("c1", "c2")
ACTORS = (*WRITERS, *COMPACTORS, "maint", "reader")
OPTIONS_ENV = "SNAPLAKE_TEST_S3_OPTIONS"


def _decode(value: Any) -> Any:
    """An ITF value as Python: bigint → int, set → frozenset, map → dict, tuple → tuple."""
    if isinstance(value, dict):
        if "#bigint" in value:
            return int(value["#bigint"])
        if "#set" in value:
            return frozenset(_decode(v) for v in value["#set"])
        if "#map" in value:
            return {_decode(k): _decode(v) for k, v in value["#map"]}
        if "#tup" in value:
            return tuple(_decode(v) for v in value["#tup"])
        return {k: _decode(v) for k, v in value.items() if not k.startswith("#")}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def traces(
    out_dir: Path, seed: int, *, count: int = 1, steps: int = 60
) -> list[list[dict[str, Any]]]:
    """``count`` random traces of the ``replayable`` module (one quint run), states by name."""
    done = subprocess.run(
        [str(QUINT), "run", "--backend", "typescript", "--main", "replayable",
         "--step", "replayStep", "--invariant", "AllGuarantees", "--max-samples", str(count),
         "--n-traces", str(count), "--max-steps", str(steps), "--seed", str(seed),
         "--out-itf", str(out_dir / "trace_{seq}.itf.json"), str(SPEC)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = []
    for i in range(count):
        states = json.loads((out_dir / f"trace_{i}.itf.json").read_text())["states"]
        out.append(
            [{k.rsplit("::", 1)[-1]: _decode(v) for k, v in s.items() if "::" in k} for s in states]
        )
    return out


# ---------------------------------------------------------------------------- the worker
def _worker(uri: str, identifier: str, actor: str) -> None:  # pragma: no cover - subprocess
    import snaplake
    from snaplake.commit.file_store_commit import FileStoreCommit
    from snaplake.commit.message import CommitMessage, CompactIncrement
    from snaplake.commit.retry import RetryPolicy
    from snaplake.errors import StorageError
    from snaplake.store.format.snapshot import CommitKind

    logging.disable(logging.CRITICAL)  # the injected faults' warnings: expected
    options = json.loads(os.environ.get(OPTIONS_ENV, "{}"))
    table = snaplake.FileSystemCatalog(uri, options=options).get_table(identifier)
    committer = FileStoreCommit.of(
        table, commit_user=actor, retry_policy=RetryPolicy(max_retries=0, min_wait_s=0.001)
    )
    pending: list[Any] = []  # the messages of the job in flight
    planned: list[Any] = []  # (scan, splits) of the reader

    def paths_of(messages: list[Any]) -> list[str]:
        schema = table.schema()
        return [
            table.paths.data_file_path(schema.partition_path_of(m.partition), m.bucket, f.file_name)
            for m in messages
            for f in (*m.data_increment.new_files, *m.compact_increment.compact_after)
        ]

    def written(rows: list[int]) -> list[Any]:
        write = table.new_write(commit_user=actor)
        write.write_arrow(pa.table({"row": pa.array(rows, pa.int64())}))
        return list(write.prepare_commit())

    def handle(cmd: dict[str, Any]) -> dict[str, Any]:
        nonlocal pending
        op = cmd["op"]
        if op == "write":
            pending = written(cmd["rows"])
            return {"paths": paths_of(pending)}
        if op == "compact":
            inputs = {
                f.file_name: (s, f) for s in table.new_scan().plan() for f in s.files
            }  # fmt: skip
            picked = [inputs[name] for name in cmd["inputs"]]
            (out,) = written(cmd["rows"])
            split = picked[0][0]
            pending = [
                CommitMessage(
                    partition=split.partition, bucket=split.bucket,
                    total_buckets=out.total_buckets,
                    compact_increment=CompactIncrement(
                        compact_before=tuple(f for _, f in picked),
                        compact_after=tuple(out.data_increment.new_files),
                    ),
                )
            ]  # fmt: skip
            return {"paths": paths_of(pending)}
        if op == "commit":
            real_publish = table.file_io.publish
            if cmd.get("fault") == "unknown":  # a 5xx/timeout before the commit point, each try

                def failing(path: str, *_a: Any, **_k: Any) -> None:
                    raise StorageError("injected timeout", path=path, operation="publish")

                table.file_io.publish = failing  # type: ignore[method-assign]
            try:
                result = committer.commit(
                    pending, commit_identifier=cmd["ident"],
                    overwrite={} if cmd.get("overwrite") else None,
                    kind=CommitKind.COMPACT if cmd.get("compact") else None,
                )  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - reported to the driver
                unknown = type(exc).__name__ == "CommitStateUnknownError"
                if not unknown:  # TableCommit.abort / CompactionJob: the job's files go
                    table.file_io.delete_many(paths_of(pending))
                return {"error": type(exc).__name__}
            finally:
                table.file_io.publish = real_publish  # type: ignore[method-assign]
            return {"snapshot_id": result.snapshot_id, "was_duplicate": result.was_duplicate}
        if op == "abort":
            table.file_io.delete_many(paths_of(pending))
            pending = []
            return {}
        if op == "expire":
            table.expire_snapshots()
            return {}
        if op == "orphan":
            cutoff = datetime.fromtimestamp(cmd["cutoff"], tz=UTC)
            table.remove_orphan_files(older_than=cutoff, dry_run=False)
            return {}
        if op == "tag":
            table.create_tag(cmd["name"], snapshot_id=cmd["snapshot"])
            return {}
        if op == "untag":
            table.delete_tag(cmd["name"])
            return {}
        if op == "consume":
            table.set_consumer("consumer", next_snapshot=cmd["next"])
            return {}
        if op == "plan":
            scan = table.new_scan(snapshot_id=cmd.get("snapshot"), tag=cmd.get("tag"))
            planned[:] = [scan, scan.plan()]
            return {}
        if op == "read":
            scan, splits = planned
            try:
                rows = table.file_store(scan.schema).read(
                    splits, read_schema=scan.schema, columns=scan.columns,
                    predicates=scan.predicates, limit=None, evolution=scan.evolution,
                    schema_of=table.schema_manager.schema,
                )  # fmt: skip
            except (FileNotFoundError, LookupError, ValueError) as exc:
                return {"error": type(exc).__name__}
            return {"rows": sorted(rows.column("row").to_pylist())}
        raise ValueError(f"unknown op {op}")

    for line in sys.stdin:
        print(json.dumps(handle(json.loads(line))), flush=True)


# ---------------------------------------------------------------------------- the driver
class Replay:
    """The actors' worker processes and the mapping of spec files to real paths.

    Args:
        uri: The warehouse (a directory or ``s3://bucket/wh``).
        table: The test's handle on the (created) table ``db.t``.
        env: The workers' environment (S3 options for SeaweedFS).
        mtime_step_s: Sleep around each spec ``tick`` so that file modification times
            order with the ticks (the store's mtime resolution: 1 s on S3).
    """

    def __init__(
        self, uri: str, table: Any, *, env: dict[str, str] | None = None, mtime_step_s: float
    ) -> None:
        self.table = table
        self.mtime_step_s = mtime_step_s
        self.paths: dict[int, str] = {}  # spec file id -> data file path
        self._tags: dict[int, frozenset[int]] = {}  # tag (snapshot id) -> its live files
        self._read_snapshots: set[int] = set()
        self._read_tags: set[int] = set()
        self.tick_times = [time.time()]  # wall time at which the spec clock reached i
        self.workers = {
            a: subprocess.Popen(
                [sys.executable, "-m", "tests.spec.replay", uri, "db.t", a],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=env or dict(os.environ),
            )
            for a in ACTORS
        }
        time.sleep(mtime_step_s)

    def close(self) -> None:
        for p in self.workers.values():
            if p.stdin:
                p.stdin.close()
        for p in self.workers.values():
            p.wait(timeout=60)

    def send(self, actor: str, **cmd: Any) -> dict[str, Any]:
        proc = self.workers[actor]
        assert proc.stdin and proc.stdout
        proc.stdin.write(json.dumps(cmd) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, f"worker {actor} died"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _name(self, f: int) -> str:
        return self.paths[f].rsplit("/", 1)[-1]

    def step(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        """Do on the table what the spec did from ``before`` to ``after``."""
        landed = {
            after["history"][k]["user"]: k
            for k in after["history"].keys() - before["history"].keys()
        }
        for u in (*WRITERS, *COMPACTORS):
            self._job_step(u, before, after, landed.get(u))
        if after["clock"] != before["clock"]:
            time.sleep(self.mtime_step_s)
            self.tick_times.append(time.time())
            time.sleep(self.mtime_step_s)
        if after["consumer"] != before["consumer"]:
            self.send("maint", op="consume", next=after["consumer"])
        for k in sorted(after["tags"].keys() - before["tags"].keys()):
            self.send("maint", op="tag", name=f"t{k}", snapshot=k)
        for k in sorted(before["tags"].keys() - after["tags"].keys()):
            self.send("maint", op="untag", name=f"t{k}")
        if after["snapshots"].keys() < before["snapshots"].keys():
            self.send("maint", op="expire")
        elif after["store"] < before["store"] and not self._jobs_moved(before, after):
            # orphanClean: files born before the tick to clock - GRACE are old enough.
            boundary = after["clock"] - GRACE
            self.send("maint", op="orphan", cutoff=self.tick_times[boundary])
        self._reader_step(before["reader"], after["reader"])

    @staticmethod
    def _jobs_moved(before: dict[str, Any], after: dict[str, Any]) -> bool:
        return bool(before["jobs"] != after["jobs"])

    def _job_step(
        self, u: str, before: dict[str, Any], after: dict[str, Any], k: int | None
    ) -> None:
        bj, aj = before["jobs"][u], after["jobs"][u]
        if bj["phase"] == "idle" and aj["phase"] == "ready":  # write / compact
            (f,) = aj["adds"]
            if u in COMPACTORS:
                got = self.send(u, op="compact", inputs=[self._name(d) for d in sorted(aj["dels"])],
                                rows=sorted(after["files"][f]["rows"]))  # fmt: skip
            else:
                got = self.send(u, op="write", rows=[f])
            (self.paths[f],) = got["paths"]
            return
        commit = {
            "ident": bj["ident"],
            "overwrite": bj["kind"] == "OVERWRITE",
            "compact": u in COMPACTORS,
        }
        if k is not None:  # the snapshot lands: the real commit publishes it
            self._expect(u, bj, {"snapshot_id": k, "was_duplicate": False}, commit)
        elif bj["phase"] == "uncertain" and aj["phase"] == "unknown":
            landed = any(
                s["user"] == u and s["ident"] == bj["ident"] for s in after["history"].values()
            )
            if not landed:  # CommitStateUnknownError, nothing published
                self._expect(u, bj, {"error": "CommitStateUnknownError"}, commit, fault="unknown")
        elif bj["phase"] not in ("idle", "uncertain") and aj["phase"] == "idle":
            gained = after["acked"] - before["acked"]
            if gained:  # a duplicate: acknowledged at the snapshot holding the identifier
                (holder,) = {s for _, s in gained}
                self._expect(u, bj, {"snapshot_id": holder, "was_duplicate": True}, commit)
            elif bj["phase"] == "ready":  # conflict, or a retry whose files were cleaned
                retried_missing = bj["retried"] and not bj["adds"] <= before["store"]
                error = "CommitFilesMissingError" if retried_missing else "CommitConflictError"
                self._expect(u, bj, {"error": error}, commit)
            else:  # failed before the commit point, or retries exhausted: abort
                self.send(u, op="abort")

    def _expect(
        self, u: str, job: dict[str, Any], want: dict[str, Any], commit: dict[str, Any], **kw: Any
    ) -> None:
        got = self.send(u, op="commit", **commit, **kw)
        assert got == want, (u, job, got)

    def _reader_step(self, br: dict[str, Any], ar: dict[str, Any]) -> None:
        if ar == br:
            return
        if ar["phase"] == "planned":
            k = ar["snap"]
            if ar["files"] == self._tag_live(k):
                self.send("reader", op="plan", tag=f"t{k}")
            else:
                self.send("reader", op="plan", snapshot=k)
        else:
            got = self.send("reader", op="read")
            if ar["result"] == "rows":
                assert got == {"rows": sorted(ar["rows"])}, got
            else:
                assert "error" in got, got

    def _tag_live(self, k: int) -> frozenset[int] | None:
        return self._tags.get(k)

    def compare(self, state: dict[str, Any]) -> None:
        """Assert the table holds ``state`` (the test's own handle reads it)."""
        self._tags = {k: t["live"] for k, t in state["tags"].items()}
        table = self.table
        assert [s.id for s in table.snapshots()] == sorted(state["snapshots"])
        # A snapshot (and a tag of it) is immutable: its rows are read once, when it appears;
        # its files' existence is checked after every step below.
        for k in state["snapshots"].keys() - self._read_snapshots:
            got = sorted(table.to_arrow(snapshot_id=k).column("row").to_pylist())
            assert got == sorted(state["expected"][k]), k
            self._read_snapshots.add(k)
        assert sorted(t.name for t in table.list_tags()) == sorted(f"t{k}" for k in state["tags"])
        for k in state["tags"].keys() - self._read_tags:
            got = sorted(table.to_arrow(tag=f"t{k}").column("row").to_pylist())
            assert got == sorted(state["expected"][k])
            self._read_tags.add(k)
        assert table.consumers() == ({"consumer": state["consumer"]} if state["consumer"] else {})
        latest = table.latest_snapshot()
        txn = latest.txn_map() if latest else {}
        spec_txn = state["snapshots"][max(state["snapshots"])]["txn"] if state["snapshots"] else {}
        assert {u: i for u, i in txn.items() if u in (*WRITERS, *COMPACTORS)} == spec_txn
        for f, path in self.paths.items():
            assert table.file_io.exists(path) == (f in state["store"]), (f, path)


def replay_trace(uri: str, table: Any, states: list[dict[str, Any]], **kw: Any) -> None:
    """Replay ``states`` on ``table`` (at ``uri``), comparing after every step."""
    replay = Replay(uri, table, **kw)
    try:
        for before, after in itertools.pairwise(states):
            replay.step(before, after)
            replay.compare(after)
    finally:
        replay.close()


if __name__ == "__main__":
    _worker(*sys.argv[1:4])
