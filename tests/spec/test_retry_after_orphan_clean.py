"""A retry of an unknown-outcome commit after orphan clean's grace, on a local warehouse.

The spec (``RETRY_VERIFIES_FILES``; the broken variant ``retryTrustsFiles`` publishes a
snapshot naming deleted files) says the retry must check its files; this holds the code to
it: the retry raises ``CommitFilesMissingError`` and publishes nothing, while a retry before
any clean still lands exactly once. The S3 twin is tests/integration/s3/test_s3_spec_replay.py.
"""

from __future__ import annotations

import pyarrow as pa
from tests.helpers import create_table
from tests.spec.retry_after_clean import (
    check_retry_after_orphan_clean_is_refused,
    check_retry_within_grace_lands,
)

SCHEMA = pa.schema([("row", pa.int64())])
BATCH = pa.table({"row": pa.array([1, 2, 3], pa.int64())})


def test_retry_after_orphan_clean_is_refused(tmp_path):
    table = create_table(tmp_path / "wh", schema=SCHEMA)
    check_retry_after_orphan_clean_is_refused(table, BATCH)


def test_retry_within_grace_lands_once(tmp_path):
    table = create_table(tmp_path / "wh", schema=SCHEMA)
    check_retry_within_grace_lands(table, BATCH)
