"""8 OS processes append to one table on SeaweedFS at once: nothing lost, nothing duplicated.

The S3 twin of tests/integration/test_concurrency.py: the publish is a conditional
``PutObject`` (``If-None-Match: *``) instead of a hard link.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.integration.s3.conftest import OPTIONS_ENV, SCHEMA, S3Warehouse

WRITER = Path(__file__).parents[1] / "writer_proc.py"
WRITERS = 8
COMMITS = 20
ROWS = 3

pytestmark = [pytest.mark.integration, pytest.mark.s3]


def _run_writers(warehouse: S3Warehouse, root: str) -> list[list[str]]:
    start_at = time.time() + 4.0  # every process imports first, then all start together
    env = warehouse.subprocess_env()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WRITER),
                "--root",
                root,
                "--user",
                f"w{n}",
                "--user-no",
                str(n),
                "--idents",
                ",".join(map(str, range(1, COMMITS + 1))),
                "--rows",
                str(ROWS),
                "--start-at",
                str(start_at),
                "--s3-options-env",
                OPTIONS_ENV,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(WRITERS)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        outputs.append([line for line in out.splitlines() if line.startswith("ACK")])
    return outputs


def test_eight_processes_append_20_commits_each_on_seaweedfs(warehouse):
    # Many racing writers lose the publish race often: allow enough retries.
    table = warehouse.catalog().create_table(
        "db.t", schema=SCHEMA, options={"commit.max-retries": "200"}
    )
    outputs = _run_writers(warehouse, table.root)

    acked = []
    for n, lines in enumerate(outputs):
        assert len(lines) == COMMITS, f"writer {n} acknowledged {len(lines)} of {COMMITS}"
        for line in lines:
            _, _ident, snap, dup, _attempts = line.split()
            assert dup == "0"
            acked.append(int(snap))
    total = WRITERS * COMMITS
    assert sorted(acked) == list(range(1, total + 1)), "snapshot ids not contiguous"

    reopened = warehouse.catalog().get_table("db.t")
    snaps = reopened.snapshots()
    assert [s.id for s in snaps] == list(range(1, total + 1))
    ids = reopened.to_arrow().column("id").to_pylist()
    assert len(ids) == len(set(ids)) == total * ROWS, "a row was lost or duplicated"
    expected = {
        i * 1_000_000 + n * 10_000 + k
        for n in range(WRITERS) for i in range(1, COMMITS + 1) for k in range(ROWS)
    }  # fmt: skip
    assert set(ids) == expected
    assert snaps[-1].total_record_count == total * ROWS
    assert snaps[-1].txn_map() == {f"w{n}": COMMITS for n in range(WRITERS)}
    # Lost races leave no stray manifest lists behind (each attempt cleans up its own).
    referenced = set()
    for s in snaps:
        referenced |= {s.base_manifest_list, s.delta_manifest_list}
    lists = {
        k.rsplit("/", 1)[-1] for k in warehouse.list_keys("wh/db.db/t/manifest/manifest-list-")
    }
    assert lists == referenced
