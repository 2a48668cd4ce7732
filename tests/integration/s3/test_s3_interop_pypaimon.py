"""A table snaplake wrote on SeaweedFS, read by pypaimon 2.1.0 through its own S3 support.

pypaimon reaches the custom endpoint with its ``s3.endpoint`` / ``s3.path-style-access``
options (pyarrow's S3 filesystem in the pypaimon venv), so no copy to local disk is
needed. The rows must be identical.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import SCHEMA, assert_same_rows, rows, write_and_commit
from tests.oracle import paimon_python, requires_paimon

pytestmark = [pytest.mark.integration, pytest.mark.s3, requires_paimon]

READER = Path(__file__).with_name("paimon_s3_read.py")


def _pypaimon_read(warehouse, identifier: str, tmp_path: Path) -> pa.Table:
    ep = warehouse.endpoint
    options = {
        "s3.endpoint": ep.url,
        "s3.region": ep.region,
        "s3.access-key": ep.access_key_id,
        "s3.secret-key": ep.secret_access_key,
        "s3.path-style-access": "true",
    }
    env = {**os.environ, "SNAPLAKE_TEST_PAIMON_S3_OPTIONS": json.dumps(options)}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    out = tmp_path / f"{identifier}.arrow"
    proc = subprocess.run(
        [str(paimon_python()), str(READER), warehouse.uri, identifier, str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    with pa.OSFile(str(out), "rb") as source:
        return pa.ipc.open_file(source).read_all()


def test_pypaimon_reads_a_snaplake_table_on_seaweedfs(warehouse, tmp_path):
    catalog = warehouse.catalog()
    part = catalog.create_table("db.part", schema=SCHEMA, partition_keys=["month"])
    for i in range(3):
        write_and_commit(part, rows(i * 200, 200), commit_user="s", commit_identifier=i)
    replacement = rows(5000, 60)
    write_and_commit(
        part,
        replacement.filter(pc.equal(replacement.column("month"), 2)),
        commit_user="s",
        overwrite={"month": 2},
    )
    bucketed = catalog.create_table(
        "db.bucketed", schema=SCHEMA, partition_keys=["month"],
        options={"bucket": "4", "bucket-key": "carrier"},
    )  # fmt: skip
    for i in range(2):
        write_and_commit(bucketed, rows(i * 100, 100), commit_user="s", commit_identifier=i)

    for identifier in ("db.part", "db.bucketed"):
        ours = catalog.get_table(identifier).to_arrow()
        assert ours.num_rows > 0
        assert_same_rows(ours, _pypaimon_read(warehouse, identifier, tmp_path))


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_orc_and_avro_tables_on_s3_both_ways(warehouse, tmp_path, fmt):
    """Written, compacted and read through S3 (pyarrow's S3 filesystem), then read by pypaimon."""
    catalog = warehouse.catalog()
    table = catalog.create_table(
        f"db.{fmt}", schema=SCHEMA, partition_keys=["month"],
        options={"file.format": fmt, "compaction.min.file-num": "3"},
    )  # fmt: skip
    for i in range(3):
        write_and_commit(table, rows(i * 50, 50), commit_user="s", commit_identifier=i)
    assert table.compact().files_after == 3
    ours = table.to_arrow()
    assert ours.sort_by("id").equals(rows(0, 150))
    assert_same_rows(ours, _pypaimon_read(warehouse, f"db.{fmt}", tmp_path))
