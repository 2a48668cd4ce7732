"""Model-based tests: traces of spec/commit.qnt replayed against the implementation, locally.

Two random traces of the ``replayable`` module (fixed seed, 60 steps: writers with lost races,
failed and uncertain publishes and the caller's retry of an unknown outcome, an append
compaction that may conflict, expiry, orphan clean as time passes, tags, the consumer, a
reader planning a snapshot or tag and reading it later) are replayed on a local warehouse by
one worker process per spec actor (tests/spec/replay.py). After every step the table must
hold the spec's state: retained snapshot ids, the rows of each retained snapshot and tag, the
tags, the consumer, the latest snapshot's exactly-once map, and which data files exist. A
commit the spec publishes lands at the same id; a duplicate comes back ``was_duplicate``
naming the holding snapshot; a conflicting compaction raises ``CommitConflictError``; a retry
whose files orphan clean removed raises ``CommitFilesMissingError``; a read of a snapshot whose
files were removed raises a typed error, never returns a part of the rows.
The S3 run (SeaweedFS, ``If-None-Match``) is tests/integration/s3/test_s3_spec_replay.py.
"""

from __future__ import annotations

import pytest
from tests.helpers import create_table
from tests.spec.quint_cli import QUINT
from tests.spec.replay import OPTIONS, SCHEMA, replay_trace, traces

pytestmark = pytest.mark.skipif(not QUINT.exists(), reason="run `make spec-quint` first")


def test_spec_traces_replay_on_a_local_warehouse_in_several_processes(tmp_path):
    # Seed 3: a conflicting compaction, a duplicate, unknown outcomes, orphan clean, and a retry
    # whose files orphan clean removed (expiry: the S3 replay, seed 2).
    for i, states in enumerate(traces(tmp_path, seed=3, count=2)):
        where = tmp_path / f"wh{i}"
        table = create_table(where, schema=SCHEMA, options=OPTIONS)
        replay_trace(str(where), table, states, mtime_step_s=0.05)
        assert states[-1]["history"], "the trace committed nothing"
