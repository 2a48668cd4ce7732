"""Four writer processes upsert overlapping keys into one dynamic-bucket table (issue 20 item 2).

Whatever the interleaving, no key may end up in two buckets: a commit whose
HASH files changed under it is refused and its batch written again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.integration.dynamic_writer_proc import keys
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows

import snaplake

pytestmark = pytest.mark.integration

PROC = Path(__file__).with_name("dynamic_writer_proc.py")
WRITERS, ROUNDS = 4, 6


def test_four_writers_never_put_a_key_in_two_buckets(tmp_path: Path) -> None:
    table = snaplake.FileSystemCatalog(str(tmp_path / "wh")).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"dynamic-bucket.target-row-num": "8"},
    )  # fmt: skip
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROC), table.root, str(w), str(ROUNDS), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    go.touch()
    acks = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        acks.append([line.split() for line in out.splitlines() if line.startswith("ACK")])
    assert [len(a) for a in acks] == [ROUNDS] * WRITERS
    written: dict[tuple[int, int], list[dict[str, object]]] = {}
    for w in range(WRITERS):
        for k in range(ROUNDS):
            start, n = keys(w, k)
            for r in make_rows(start, n, seed=w):
                written.setdefault((r["month"], r["id"]), []).append(r)
    assert assert_one_bucket_per_key(table) > WRITERS
    got = sorted_rows(table.to_arrow())
    assert [(r["month"], r["id"]) for r in got] == sorted(written)  # each key once
    for r in got:  # the value one of the writers wrote for it
        assert r in written[(r["month"], r["id"])]
    snapshots = {int(a[2]) for lines in acks for a in lines}
    assert len(snapshots) == WRITERS * ROUNDS  # every batch landed in a snapshot of its own
