"""``snaplake consumers TABLE``: list with lag, ``--reset ID --to N``, ``--delete ID``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import snaplake

SCRIPT = Path(sys.executable).parent / "snaplake"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])

pytestmark = pytest.mark.integration


@pytest.fixture
def env(tmp_path):
    if not SCRIPT.exists():
        pytest.skip(f"{SCRIPT} is missing; run .venv/bin/pip install -e . --no-deps")
    out = {k: v for k, v in os.environ.items() if not k.startswith("SNAPLAKE_")}
    out["SNAPLAKE_WAREHOUSE"] = str(tmp_path / "wh")
    return out


def run(env, *args, expect=0):
    proc = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert proc.returncode == expect, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def listing(env):
    return json.loads(run(env, "--output", "json", "consumers", "db.t").stdout)


def test_list_reset_delete_and_refusals(env):
    catalog = snaplake.FileSystemCatalog(env["SNAPLAKE_WAREHOUSE"])
    table = catalog.create_table("db.t", schema=SCHEMA)
    for k in range(3):
        table.write(pa.table({"id": [k]}, schema=SCHEMA))
    assert listing(env) == []
    with table.subscribe("job", stop_when_idle=True) as sub:
        next(sub).ack()
    with table.subscribe("done", stop_when_idle=True) as sub:
        for batch in sub:
            batch.ack()
    rows = listing(env)
    assert [(r["consumer"], r["next_snapshot"], r["lag_snapshots"]) for r in rows] == [
        ("done", 4, 0), ("job", 2, 2)]  # fmt: skip
    assert rows[0]["lag_seconds"] == 0
    assert rows[1]["lag_seconds"] >= 0  # now - commit time of snapshot 2
    text = run(env, "consumers", "db.t").stdout
    assert "lag (snapshots)" in text and "job" in text

    out = json.loads(run(env, "--output", "json", "consumers", "db.t", "--reset", "job",
                         "--to", "1").stdout)  # fmt: skip
    assert {r["consumer"]: r["next_snapshot"] for r in out} == {"done": 4, "job": 1}
    assert table.consumers() == {"done": 4, "job": 1}
    # 4: N is neither retained nor the next snapshot; 2: bad usage or id
    run(env, "consumers", "db.t", "--reset", "job", "--to", "9", expect=4)
    run(env, "consumers", "db.t", "--reset", "job", expect=2)
    run(env, "consumers", "db.t", "--reset", "../x", "--to", "1", expect=2)
    run(env, "consumers", "db.t", "--delete", "a/b", expect=2)
    assert table.consumers() == {"done": 4, "job": 1}

    # 3: a live subscription holds the id
    with table.subscribe("job", stop_when_idle=True):
        busy = run(env, "consumers", "db.t", "--delete", "job", expect=3)
        assert busy.stdout == ""
        assert "in use by a live subscription" in busy.stderr
        assert f"pid {os.getpid()}" in busy.stderr
        run(env, "consumers", "db.t", "--reset", "job", "--to", "2", expect=3)
    assert table.consumers() == {"done": 4, "job": 1}

    out = json.loads(run(env, "--output", "json", "consumers", "db.t", "--delete", "job").stdout)
    assert [r["consumer"] for r in out] == ["done"]
    assert table.consumers() == {"done": 4}
