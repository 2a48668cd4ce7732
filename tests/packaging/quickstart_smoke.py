"""The README as a new user runs it, inside a fresh virtualenv holding only the installed wheel.

Run by :mod:`tests.packaging.fresh_install` (``make package-smoke``, part of
``make test``) with the fresh venv's interpreter, from a scratch directory and
without ``PYTHONPATH``, so ``import snaplake`` finds the installed package and
nothing from the source tree or the dev group. Each command exercises what one
install (the core, or the core plus one extra) promises; an undeclared import
fails it with ``ModuleNotFoundError``.

Usage: ``python quickstart_smoke.py {core,pandas,s3,cli,metrics,daemon,spark} WORKDIR``.
Standard library plus what the install under test brings, nothing else.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _installed_snaplake() -> Any:
    """Import snaplake and check that it is the wheel in this venv, not the source tree."""
    import snaplake

    location = Path(snaplake.__file__).resolve()
    if not location.is_relative_to(Path(sys.prefix).resolve()):
        raise SystemExit(f"snaplake imported from {location}, not from the venv {sys.prefix}")
    return snaplake


def _flights() -> Any:
    import pyarrow as pa

    schema = pa.schema(
        [
            pa.field("month", pa.int32()),
            pa.field("carrier", pa.string()),
            pa.field("distance", pa.int64()),
        ]
    )
    return pa.table(
        {
            "month": [1, 1, 2, 2, 3],
            "carrier": ["AA", "UA", "DL", "AA", None],
            "distance": [1500, 700, 2400, 300, 1200],
        },
        schema=schema,
    )


def _quick_start(warehouse: str, options: dict[str, str] | None = None) -> Any:
    """The README's quick start; returns the table."""
    snaplake = _installed_snaplake()
    data = _flights()
    catalog = snaplake.FileSystemCatalog(warehouse, options=options)
    catalog.create_database("db", ignore_if_exists=True)
    table = catalog.create_table(
        "db.flights", schema=data.schema, partition_keys=["month"], options={"bucket": "-1"}
    )
    write = table.new_write(commit_user="ingest-1")
    write.write_arrow(data)
    result = table.new_commit(commit_user="ingest-1").commit(
        write.prepare_commit(), commit_identifier=7
    )
    assert result.snapshot_id == 1 and not result.was_duplicate, result
    replay = table.new_write(commit_user="ingest-1")
    replay.write_arrow(data)
    again = table.new_commit(commit_user="ingest-1").commit(
        replay.prepare_commit(), commit_identifier=7
    )
    assert again.was_duplicate, again
    between = datetime.now(UTC)
    time.sleep(0.01)
    more = table.new_write(commit_user="ingest-1")
    more.write_arrow(data.slice(0, 2))
    table.new_commit(commit_user="ingest-1").commit(more.prepare_commit(), commit_identifier=8)

    assert table.to_arrow().num_rows == 7
    assert table.to_arrow(snapshot_id=1).sort_by("distance").equals(data.sort_by("distance"))
    assert table.to_arrow(as_of=between).num_rows == 5
    filtered = table.to_arrow(filter=[("distance", ">", 1000), ("carrier", "in", ["AA", "UA"])])
    assert sorted(filtered.column("distance").to_pylist()) == [1500, 1500], filtered
    splits = table.new_scan(partition_filter={"month": 1}).plan()
    assert splits and sum(f.row_count for s in splits for f in s.files) == 4, splits
    table.compact()
    table.merge_manifests(full=False)
    table.expire_snapshots(dry_run=True)
    return table


def core(work: Path) -> None:
    """The quick start and maintenance calls on a local warehouse."""
    _quick_start(str(work / "warehouse"))


def pandas(work: Path) -> None:
    """``Table.to_pandas`` with the ``pandas`` extra."""
    frame = _quick_start(str(work / "warehouse")).to_pandas()
    assert len(frame) == 7 and list(frame.columns) == ["month", "carrier", "distance"]


def _load_test_module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def s3(work: Path) -> None:
    """The README's S3 example on a real SeaweedFS, credentials from the AWS environment."""
    servers = _load_test_module("s3_servers", HERE.parent / "s3_servers.py")
    server = servers.start_seaweedfs(data_dir=work / "weed")
    try:
        endpoint = server.endpoint
        bucket = endpoint.new_bucket("smoke")
        os.environ["AWS_ACCESS_KEY_ID"] = endpoint.access_key_id
        os.environ["AWS_SECRET_ACCESS_KEY"] = endpoint.secret_access_key
        os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
        table = _quick_start(
            f"s3://{bucket}/warehouse",
            {"s3.endpoint": endpoint.url, "s3.path-style-access": "true"},
        )
        assert table.to_arrow().num_rows == 7
    finally:
        server.stop()


def _snaplake_cli(*args: str, work: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "snaplake"
    return subprocess.run(
        [str(exe), "--warehouse", str(work / "cli-wh"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=work,
    )


def cli(work: Path) -> None:
    """The README's command-line examples through the installed ``snaplake`` script."""
    import pyarrow.parquet as pq

    _installed_snaplake()
    data = _flights()
    pq.write_table(data, work / "f1.parquet")
    (work / "f2.csv").write_text("month,carrier,distance\n4,B6,944\n")
    steps = [
        ("create-table", "demo.t", "--from-parquet", "f1.parquet", "--partition-keys", "month"),
        ("write", "demo.t", "f1.parquet", "f2.csv"),
        ("databases",),
        ("tables", "demo"),
        ("read", "demo.t", "--filter", "distance > 1000", "--limit", "10"),
        ("snapshots", "demo.t"),
    ]
    outputs = []
    for step in steps:
        done = _snaplake_cli(*step, work=work)
        if done.returncode != 0:
            raise SystemExit(f"snaplake {' '.join(step)} exited {done.returncode}: {done.stderr}")
        outputs.append(done.stdout)
    assert "2400" in outputs[4] and "300" not in outputs[4], outputs[4]
    files = _snaplake_cli("--output", "json", "files", "demo.t", work=work)
    assert files.returncode == 0, files.stderr
    assert sum(int(f["rows"]) for f in json.loads(files.stdout)) == 6, files.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(url: str, *, want: str, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    body = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body = str(response.read().decode())
            if want in body:
                return body
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{url} never showed {want!r}; last body:\n{body[-2000:]}")


def metrics(work: Path) -> None:
    """A writer serving its commit metrics (``snaplake.metrics.serve``) and a scrape of them."""
    _installed_snaplake()
    from snaplake.metrics import serve

    server = serve(0)
    try:
        table = _quick_start(str(work / "warehouse"))
        body = _scrape(f"{server.url}/metrics", want='outcome="duplicate"')
        assert 'snaplake_commits_total{kind="APPEND",outcome="success",table="db.flights"}' in (
            body
        ), body
        assert table.to_arrow().num_rows == 7
    finally:
        server.close()


def daemon(work: Path) -> None:
    """``python -m snaplake.daemon`` maintaining the quick-start table, scraped, then SIGTERM."""
    _quick_start(str(work / "warehouse"))
    port = _free_port()
    config = work / "snaplake.toml"
    config.write_text(
        f'[metrics]\nlisten = "127.0.0.1:{port}"\n\n'
        f'[[warehouse]]\nuri = "{work / "warehouse"}"\ntables = ["db.*"]\n\n'
        '[tasks.manifest_merge]\ninterval = "1 s"\n\n'
        '[tasks.expire_snapshots]\ninterval = "1 s"\n'
    )
    check = subprocess.run(
        [sys.executable, "-m", "snaplake.daemon", "--check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "snaplake.daemon", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _scrape(
            f"http://127.0.0.1:{port}/metrics",
            want='snaplake_snapshot_latest_id{table="db.flights"}',
        )
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"daemon exited {proc.returncode} on SIGTERM: {err[-2000:]}")


def spark(work: Path) -> None:
    """``snaplake.spark.write`` and ``read`` on a local Spark (pyspark from the ``spark`` extra)."""
    _installed_snaplake()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from snaplake.spark import read, write

    session = (
        SparkSession.builder.master("local[1]")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        table = _quick_start(str(work / "warehouse"))
        df = session.createDataFrame(_flights().to_pandas())
        write(df, "db.flights", warehouse=str(work / "warehouse"))
        back = read(session, "db.flights", warehouse=str(work / "warehouse"))
        assert back.count() == 12 == table.to_arrow().num_rows
    finally:
        session.stop()


COMMANDS = {f.__name__: f for f in (core, pandas, s3, cli, metrics, daemon, spark)}


def main(argv: list[str]) -> int:
    """Run one smoke command; exit 0 on success."""
    if len(argv) != 2 or argv[0] not in COMMANDS:
        print(f"usage: quickstart_smoke.py {{{','.join(COMMANDS)}}} WORKDIR", file=sys.stderr)
        return 2
    work = Path(argv[1])
    work.mkdir(parents=True, exist_ok=True)
    COMMANDS[argv[0]](work)
    print(f"smoke {argv[0]}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
