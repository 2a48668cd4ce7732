"""Property: random appends, deletes and compactions of a deletion-vector append table.

After every step snaplake reads exactly a list model's rows; at the end of each
example pypaimon 2.1.0 reads the same rows.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers import assert_same_rows
from tests.oracle import PaimonOracle, requires_paimon

from snaplake import FileSystemCatalog

SCHEMA = pa.schema([("id", pa.int64()), ("month", pa.int32()), ("v", pa.string())])

_append = st.tuples(st.just("append"), st.integers(1, 12))
_delete = st.tuples(
    st.just("delete"),
    st.sampled_from(["=", "<", ">=", "!="]),
    st.integers(0, 40),
    st.sampled_from([None, 1, 2]),
)
_compact = st.tuples(st.just("compact"), st.booleans())
_steps = st.lists(st.one_of(_append, _delete, _compact), min_size=1, max_size=8)

_OPS = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "!=": lambda a, b: a != b,
}


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {"id": ids, "month": [1 + i % 2 for i in ids], "v": [f"r{i}" for i in ids]}, schema=SCHEMA
    )


@requires_paimon
@pytest.mark.parametrize("bucket", [-1, 2])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps)
def test_random_appends_and_deletes_read_as_the_model(bucket: int, steps) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        options = {"deletion-vectors.enabled": "true", "compaction.min.file-num": "2"}
        if bucket > 0:
            options |= {"bucket": str(bucket), "bucket-key": "id"}
        table = FileSystemCatalog(str(Path(tmp) / "wh")).create_table(
            "db.t", schema=SCHEMA, partition_keys=["month"], options=options
        )
        model: list[dict[str, object]] = []
        next_id = 0
        for step in steps:
            if step[0] == "append":
                rows = _rows(next_id, step[1])
                next_id += step[1]
                table.write(rows)
                model += rows.to_pylist()
            elif step[0] == "delete":
                _, op, value, month = step
                spec = [("id", op, value)] + ([("month", "=", month)] if month else [])
                table.delete(filter=spec)
                model = [
                    r
                    for r in model
                    if not (_OPS[op](r["id"], value) and (month is None or r["month"] == month))
                ]
            else:
                table.compact(full=step[1])
            expected = pa.Table.from_pylist(model, schema=SCHEMA)
            assert_same_rows(expected, table.to_arrow(), reader="snaplake")
        if model:
            expected = pa.Table.from_pylist(model, schema=SCHEMA)
            assert_same_rows(expected, PaimonOracle(Path(tmp) / "wh").read("db.t"))
