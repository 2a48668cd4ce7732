"""spec/commit.qnt held to the code on S3: a spec trace replayed on SeaweedFS, and the late retry.

The publish here is ``PutObject`` with ``If-None-Match: *`` (SeaweedFS honours it), not the
local ``os.link``. ``test_spec_trace_replays_on_seaweedfs`` replays a random trace of the
``replayable`` module with one worker process per spec actor (tests/spec/replay.py: writers,
compactor, maintenance, reader), comparing the bucket's table with the spec's state after
every step. Time passes in the spec with ``tick``; S3 modification times have 1 s resolution,
so each tick waits 1.1 s on either side (orphan clean's cutoff is a tick's time).

The late-retry tests are the S3 twins of tests/spec/test_retry_after_orphan_clean.py: on S3
nothing fsyncs the data files before the publish, so without the retry's file check the retry
would publish a snapshot naming deleted objects.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from tests.spec.quint_cli import QUINT
from tests.spec.replay import OPTIONS, SCHEMA, replay_trace, traces
from tests.spec.retry_after_clean import (
    check_retry_after_orphan_clean_is_refused,
    check_retry_within_grace_lands,
)

pytestmark = [pytest.mark.integration, pytest.mark.s3]

BATCH = pa.table({"row": pa.array([1, 2, 3], pa.int64())})


@pytest.mark.skipif(not QUINT.exists(), reason="run `make spec-quint` first")
def test_spec_trace_replays_on_seaweedfs(warehouse, tmp_path):
    (states,) = traces(tmp_path, seed=2, count=1)  # dup, expire, unknown outcomes
    table = warehouse.catalog().create_table("db.t", schema=SCHEMA, options=OPTIONS)
    replay_trace(warehouse.uri, table, states, env=warehouse.subprocess_env(), mtime_step_s=1.1)
    assert states[-1]["history"], "the trace committed nothing"


def test_retry_after_orphan_clean_is_refused_on_s3(warehouse):
    table = warehouse.catalog().create_table("db.t", schema=SCHEMA)
    check_retry_after_orphan_clean_is_refused(table, BATCH)


def test_retry_within_grace_lands_once_on_s3(warehouse):
    table = warehouse.catalog().create_table("db.t", schema=SCHEMA)
    check_retry_within_grace_lands(table, BATCH)
