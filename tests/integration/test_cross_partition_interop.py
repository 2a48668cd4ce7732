"""Cross-partition tables (bucket = -1, key lacking a partition key): engines and processes.

pypaimon 2.1.0 reads snaplake's cross-partition tables exactly (deduplicate
and first-row, keys that moved partition). pypaimon 2.1.0's Python writer
refuses to write such a table (``CROSS_PARTITION primary-key writes require a
persistent global primary-key index``), so no pypaimon-written table exists to
upsert into. Writers restarted as new processes keep no key twice.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.unit.mergetree.test_cross_partition import (
    assert_one_place_per_key,
    create,
    read,
    rows,
    to_table,
)

import snaplake

pytestmark = [pytest.mark.integration]

_WRITER = """
import json, sys
import pyarrow as pa
import snaplake
from tests.unit.mergetree.test_cross_partition import SCHEMA
root, ident, data = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
table = snaplake.FileSystemCatalog(root).get_table("db.t")
write = table.new_write(commit_user="proc")
for chunk in data:  # several write_arrow calls, one commit
    write.write_arrow(pa.Table.from_pylist(chunk, schema=SCHEMA))
table.new_commit(commit_user="proc").commit(write.prepare_commit(), commit_identifier=ident)
"""


@requires_paimon
@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
def test_pypaimon_reads_snaplake_cross_partition_tables(tmp_path: Path, engine: str) -> None:
    options = {"merge-engine": engine}
    if engine == "first-row":
        options["ignore-delete"] = "true"
    table = create(tmp_path, **options)
    rng = random.Random(7)
    model: dict[int, dict[str, Any]] = {}
    for ident in range(5):
        data = rows([(rng.randrange(40), rng.randrange(5)) for _ in range(25)], f"w{ident}-")
        write_and_commit(table, to_table(data), commit_identifier=ident)
        for r in data:
            if engine == "deduplicate" or r["id"] not in model:
                model[r["id"]] = r
        if ident == 2:
            table.compact()
    expected = sorted(model.values(), key=lambda r: r["id"])
    assert read(table) == expected
    assert_one_place_per_key(table)
    theirs = PaimonOracle(tmp_path).read("db.t")
    assert_same_rows(table.to_arrow(), theirs, by=["id"])
    assert_same_rows(to_table(expected), theirs, by=["id"])


def test_writers_restarted_as_new_processes_keep_no_key_twice(tmp_path: Path) -> None:
    create(tmp_path)
    rng = random.Random(11)
    model: dict[int, dict[str, Any]] = {}
    root = Path(__file__).resolve().parents[2]
    for ident in range(4):
        chunks = [
            rows([(rng.randrange(30), rng.randrange(4)) for _ in range(10)], f"p{ident}.{c}-")
            for c in range(3)
        ]
        subprocess.run(
            [sys.executable, "-c", _WRITER, str(tmp_path), str(ident), json.dumps(chunks)],
            check=True, cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        for chunk in chunks:
            for r in chunk:
                model[r["id"]] = r
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert read(table) == sorted(model.values(), key=lambda r: r["id"])
    assert_one_place_per_key(table)
