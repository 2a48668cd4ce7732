"""The installed ``snaplake`` console script, run as a subprocess on a real local warehouse.

Covers the entry point (``snaplake = "snaplake.cli:main"``), JSON documents
parsed with ``json.loads``, text output through a pipe, and exit codes 2, 3
and 4 as a shell script would see them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.unit.cli.conftest import CSV_TEXT, SALES

pytestmark = pytest.mark.integration

SCRIPT = Path(sys.executable).parent / "snaplake"

# A sitecustomize that lets a real second writer commit (through the library)
# just before the CLI's first snapshot publish: the CLI loses the race for
# real, and with commit.max-retries=0 gives up with CommitRetriesExhaustedError.
RACING_WRITER = textwrap.dedent(
    """
    import os, re
    import pyarrow as pa
    from snaplake.store.io import local_file_io

    _original = local_file_io.LocalFileIO.publish
    _raced = []

    def publish(self, path, data, **kwargs):
        if not _raced and re.search(r"/snapshot/snapshot-[0-9]+$", path):
            _raced.append(path)
            from snaplake.catalog import FileSystemCatalog
            catalog = FileSystemCatalog(os.environ["SNAPLAKE_WAREHOUSE"])
            table = catalog.get_table(os.environ["RACE_TABLE"])
            write = table.new_write(commit_user="racer")
            write.write_arrow(table.to_arrow(limit=1))
            table.new_commit(commit_user="racer").commit(write.prepare_commit())
        return _original(self, path, data, **kwargs)

    local_file_io.LocalFileIO.publish = publish
    """
)


@pytest.fixture(scope="module")
def script() -> Path:
    if not SCRIPT.exists():
        pytest.skip(f"{SCRIPT} is missing; run .venv/bin/pip install -e . --no-deps")
    return SCRIPT


def run(
    script: Path, *args: str, env: dict[str, str], expect: int = 0
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(script), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == expect, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def test_console_script_session(script: Path, tmp_path: Path) -> None:
    sales, more = tmp_path / "sales.parquet", tmp_path / "more.csv"
    pq.write_table(SALES, sales)
    more.write_text(CSV_TEXT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SNAPLAKE_")}
    env["SNAPLAKE_WAREHOUSE"] = str(tmp_path / "wh")

    run(script, "create-table", "shop.sales", "--from-parquet", str(sales),
        "--partition-keys", "day", env=env)  # fmt: skip
    argv = ["--output", "json", "write", "shop.sales", str(sales), str(more)]
    written = json.loads(run(script, *argv, env=env).stdout)
    assert written["snapshot_id"] == 1 and written["rows"] == 6 and written["files"] == 3

    text = run(script, "read", "shop.sales", "--filter", "amount > 5", env=env).stdout
    assert [line.split() for line in text.splitlines()] == [
        ["id", "city", "amount", "day"],
        ["2", "Paris", "7.0", "2024-01-01"],
        ["3", "Berlin", "9.25", "2024-01-02"],
    ]
    rows = json.loads(run(script, "--output", "json", "read", "shop.sales", env=env).stdout)
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 4, 5, 6]

    history = json.loads(run(script, "--output", "json", "snapshots", "shop.sales", env=env).stdout)
    assert [(h["id"], h["kind"], h["files_added"], h["total_records"]) for h in history] == [
        (1, "APPEND", 3, 6)
    ]
    files = json.loads(run(script, "--output", "json", "files", "shop.sales", env=env).stdout)
    assert sum(f["rows"] for f in files) == 6 and all(Path(f["path"]).is_file() for f in files)
    assert "day=2024-01-03" in run(script, "files", "shop.sales", env=env).stdout

    # exit 4: unknown table, expired/unknown snapshot -- one line on stderr, nothing on stdout
    missing = run(script, "read", "shop.nope", env=env, expect=4)
    assert missing.stdout == "" and len(missing.stderr.splitlines()) == 1
    assert missing.stderr.startswith("error: table shop.nope does not exist")
    run(script, "--output", "json", "read", "shop.sales", "--snapshot", "7", env=env, expect=4)
    # exit 2: usage
    run(script, "read", "shop.sales", "--filter", "amount >>> 1", env=env, expect=2)

    # exit 3: a concurrent writer wins the only allowed attempt
    strict = tmp_path / "strict.parquet"
    pq.write_table(SALES, strict)
    run(script, "create-table", "shop.strict", "--from-parquet", str(strict),
        "--option", "commit.max-retries=0", env=env)  # fmt: skip
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(RACING_WRITER)
    run(script, "write", "shop.strict", str(strict), env=env)  # snapshot 1, no race yet
    racing = {**env, "PYTHONPATH": str(hook), "RACE_TABLE": "shop.strict"}
    lost = run(script, "write", "shop.strict", str(strict), env=racing, expect=3)
    assert lost.stdout == ""
    assert lost.stderr.startswith("error: APPEND commit to shop.strict lost the race")
    history = json.loads(
        run(script, "--output", "json", "snapshots", "shop.strict", env=env).stdout
    )
    assert [h["user"] for h in history] == ["snaplake-cli", "racer"]
    # the same race with the default retry budget: both commits land
    argv = ["--output", "json", "write", "shop.sales", str(sales)]
    won = json.loads(run(script, *argv, env={**racing, "RACE_TABLE": "shop.sales"}).stdout)
    assert won["attempts"] == 2 and won["snapshot_id"] == 3
