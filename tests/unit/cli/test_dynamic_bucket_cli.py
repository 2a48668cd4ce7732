"""The ``snaplake`` console script on a dynamic-bucket table (a primary key, no ``bucket``).

Run as a subprocess on a local warehouse: create-table, write (upserts of known
and new keys, several buckets per partition), compact (minor and --full),
expire-snapshots, tag, rollback, remove-orphan-files and check. After each
command the table equals the model and every key is in one bucket whose HASH
file holds its hash.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.dynamic_maintenance_helpers import model
from tests.pk_helpers import PK_SCHEMA, make_rows, sorted_rows, to_table
from tests.unit.cli.test_console_script import run, script  # noqa: F401  # fixture

import snaplake

pytestmark = pytest.mark.integration


def test_dynamic_bucket_table_through_the_console_script(
    script: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SNAPLAKE_")}
    env["SNAPLAKE_WAREHOUSE"] = str(tmp_path / "wh")
    batches = [make_rows(0, 20), make_rows(10, 20, seed=1), make_rows(25, 15, seed=2)]
    files = []
    for i, batch in enumerate(batches):
        files.append(tmp_path / f"b{i}.parquet")
        pq.write_table(to_table(batch, PK_SCHEMA), files[-1])
    run(script, "create-table", "db.orders", "--from-parquet", str(files[0]),
        "--partition-keys", "month", "--primary-keys", "month,id",
        "--option", "dynamic-bucket.target-row-num=3",
        "--option", "snapshot.num-retained.min=1", "--option", "snapshot.num-retained.max=2",
        "--option", "snapshot.time-retained=0 ms", env=env)  # fmt: skip
    table = snaplake.FileSystemCatalog(env["SNAPLAKE_WAREHOUSE"]).get_table("db.orders")
    assert table.options["bucket"] == "-1" and table.bucket_mode == "dynamic"

    def check(*written: list[dict[str, Any]]) -> None:
        assert sorted_rows(table.to_arrow()) == model(*written)
        assert assert_one_bucket_per_key(table) > 3

    for i, path in enumerate(files):
        run(script, "write", "db.orders", str(path), env=env)
        check(*batches[: i + 1])
    rows = json.loads(run(script, "--output", "json", "read", "db.orders", env=env).stdout)
    assert len(rows) == len(model(*batches))
    run(script, "tag", "create", "db.orders", "t2", "--snapshot", "2", env=env)
    assert json.loads(run(script, "--output", "json", "compact", "db.orders", "--full",
                          env=env).stdout)["compacted"]  # fmt: skip
    check(*batches)
    run(script, "expire-snapshots", "db.orders", "--execute", env=env)
    assert [s.id for s in table.snapshots()] == [4]
    check(*batches)
    run(script, "check", "db.orders", env=env)
    run(script, "rollback", "db.orders", "--to", "t2", "--execute", env=env)
    check(*batches[:2])
    past = time.time() - 3 * 86400
    for f in table.file_io.list_files(table.root):
        os.utime(f.path, (past, past))
    run(script, "remove-orphan-files", "db.orders", "--execute", env=env)
    check(*batches[:2])
    run(script, "check", "db.orders", env=env)
    # a write after the rollback restores the tag's index: no key in two buckets
    run(script, "write", "db.orders", str(files[2]), env=env)
    check(batches[0], batches[1], batches[2])
    run(script, "compact", "db.orders", env=env)
    check(*batches)
