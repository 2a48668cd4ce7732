"""The README's Python and TOML blocks work when pasted (issue 18, item 12).

The Python blocks run in order in one namespace, as a reader pastes them into
one session. What the README leaves to the reader is defined here: the data
(``arrow_schema``, ``arrow_table``, ``rows``, ``kinds``, ``keys``), a
warehouse in a temporary directory instead of ``/data/warehouse``, a free port
and a local Pushgateway for the metrics block. The Spark blocks run in
``tests/spark/test_read_write.py``, the command line in ``tests/spark/test_demo.py``
(``tests/readme_blocks.py`` says which block runs where).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from tests.daemon.procs import http_get, start_pushgateway
from tests.readme_blocks import ARROW_SCHEMA, NOT_RUN, blocks_of, flights, readme_blocks, rewrite

from snaplake.daemon.config import parse_config


def _placeholders() -> dict[str, Any]:
    """What the README's blocks leave to the reader: their data."""
    rows = flights()
    keys = ["year", "month", "day", "carrier", "flight", "origin"]
    return {
        "arrow_schema": ARROW_SCHEMA,
        "arrow_table": rows,
        "rows": rows,
        "kinds": ["+I", "-U", "+U", "+I", "-D", "+I"],
        "keys": rows.select(keys).slice(0, 2),
    }


def test_every_block_is_run_or_excluded_with_a_reason():
    kinds = [b.kind for b in readme_blocks()]  # raises for a block no rule covers
    assert {"python", "spark", "cli", "toml"} <= set(kinds)
    starts = [b.first_line for b in readme_blocks() if b.kind == "not run"]
    assert len(starts) == len(NOT_RUN), starts  # every exclusion still names a block


@pytest.fixture
def pushgateway(tmp_path: Path):
    gateway = start_pushgateway(tmp_path)
    yield f"127.0.0.1:{gateway.port}"
    gateway.stop()


def test_python_blocks_run_in_order(tmp_path, monkeypatch, pushgateway):
    monkeypatch.chdir(tmp_path)
    warehouse = str(tmp_path / "warehouse")
    rewrites = {
        "Quick start": {'"/data/warehouse"': repr(warehouse)},
        "Subscriptions": {'"/data/warehouse"': repr(warehouse)},
        "Maintenance daemon and dashboards": {
            "snaplake.metrics.serve(9465)": "_server = snaplake.metrics.serve(0)",
            '"pushgateway:9091"': repr(pushgateway),
        },
    }
    namespace = _placeholders()
    blocks = blocks_of("python")
    assert [b.section for b in blocks] == [
        "Quick start", "Schema evolution", "Primary-key tables", "Reading changes",
        "Reading changes", "Subscriptions", "S3 warehouses", "Maintenance",
        "Maintenance daemon and dashboards",
    ]  # fmt: skip
    try:
        for block in blocks:
            code = rewrite(block, rewrites.get(block.section, {}))
            exec(compile(code, f"README.md:{block.line}", "exec"), namespace)
            if block.section == "Primary-key tables":
                flights = namespace["catalog"].get_table("demo.flights")
                assert flights.to_arrow().num_rows == 6
                assert "destination" in flights.to_arrow().column_names  # renamed
                assert namespace["table"].to_arrow().num_rows == 3  # 6 upserts, 1 -D, 2 deletes
            if block.section == "Subscriptions":
                mirror = namespace["mirror"].to_arrow().sort_by("flight")
                assert mirror.equals(namespace["events"].to_arrow().sort_by("flight"))
                assert namespace["events"].consumers() == {"job-a": 2, "mirror": 2}
        server = namespace["_server"]
        assert "snaplake_" in http_get(f"{server.url}/metrics")[1]
        assert 'job="nightly-load"' in http_get(f"http://{pushgateway}/metrics")[1]
    finally:
        if "_server" in namespace:
            namespace["_server"].close()


@pytest.mark.parametrize("block", blocks_of("toml"), ids=lambda b: f"line-{b.line}")
def test_daemon_configuration_blocks_parse(block):
    data = tomllib.loads(block.code)
    if "warehouse" not in data:  # a fragment: the tasks of a configuration
        data = {"warehouse": [{"uri": "/data/warehouse", "tables": ["*"]}], **data}
    config = parse_config(data, source=f"README.md:{block.line}")
    assert config.warehouses
