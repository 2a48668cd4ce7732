"""Model-based tests: traces of spec/commit.qnt replayed against the implementation.

``quint run --main replayable --out-itf`` writes a random trace of the writers' commits (lost
races, failed and uncertain publishes, retries of unknown outcomes), expiry, tags and the
consumer. Each step is replayed on a local warehouse: a snapshot the spec publishes is
committed through the real commit path with the same commit user, identifier, kind and rows;
a retry the spec deduplicates is replayed with the same (user, identifier) and must come back
``was_duplicate`` pointing at the same snapshot; expiry, tags and the consumer are applied as
the spec applies them. After every step the table's retained snapshot ids, tags, consumer and
the rows of every retained snapshot must equal the spec's state.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec" / "commit.qnt"
QUINT = ROOT / "spec" / ".quint" / "node_modules" / ".bin" / "quint"
SCHEMA = pa.schema([("row", pa.int64())])
OPTIONS = {
    "snapshot.num-retained.min": "1",
    "snapshot.num-retained.max": "2",  # the spec's RETAIN
    "snapshot.time-retained": "1000 d",
}

pytestmark = pytest.mark.skipif(not QUINT.exists(), reason="run `make spec-quint` first")


def _decode(value: Any) -> Any:
    """An ITF value as Python: bigint → int, set → frozenset, map → dict, tuple → tuple."""
    if isinstance(value, dict):
        if "#bigint" in value:
            return int(value["#bigint"])
        if "#set" in value:
            return frozenset(_decode(v) for v in value["#set"])
        if "#map" in value:
            return {_decode(k): _decode(v) for k, v in value["#map"]}
        if "#tup" in value:
            return tuple(_decode(v) for v in value["#tup"])
        return {k: _decode(v) for k, v in value.items() if not k.startswith("#")}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _trace(tmp_path: Path, seed: int) -> list[dict[str, Any]]:
    out = tmp_path / f"trace-{seed}.itf.json"
    done = subprocess.run(
        [str(QUINT), "run", "--backend", "typescript", "--main", "replayable",
         "--step", "replayStep", "--invariant", "AllGuarantees", "--max-samples", "1",
         "--max-steps", "40", "--seed", str(seed), "--out-itf", str(out), str(SPEC)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    states = json.loads(out.read_text())["states"]
    return [{k.rsplit("::", 1)[-1]: _decode(v) for k, v in s.items() if "::" in k} for s in states]


def _rows(table, snapshot_id: int) -> list[int]:
    return sorted(table.to_arrow(snapshot_id=snapshot_id).column("row").to_pylist())


def _batch(rows: frozenset[int]) -> pa.Table:
    return pa.table({"row": pa.array(sorted(rows), pa.int64())})


def _replay_step(table, before: dict[str, Any], after: dict[str, Any]) -> None:
    for k in sorted(after["history"].keys() - before["history"].keys()):
        snap = after["history"][k]
        prev = before["expected"].get(k - 1, frozenset())
        rows = after["expected"][k] if snap["kind"] == "OVERWRITE" else after["expected"][k] - prev
        result = table.write(
            _batch(rows), commit_user=snap["user"], commit_identifier=snap["ident"],
            overwrite={} if snap["kind"] == "OVERWRITE" else None,
        )  # fmt: skip
        assert (result.snapshot_id, result.was_duplicate) == (k, False)
    for row, k in sorted(after["acked"] - before["acked"]):
        if k in before["history"]:  # acknowledged as a duplicate of an earlier snapshot
            holder = before["history"][k]
            result = table.write(
                _batch(frozenset({row})), commit_user=holder["user"],
                commit_identifier=holder["ident"],
            )  # fmt: skip
            assert (result.snapshot_id, result.was_duplicate) == (k, True)
    if after["consumer"] != before["consumer"]:
        table.set_consumer("consumer", next_snapshot=after["consumer"])
    for k in sorted(after["tags"].keys() - before["tags"].keys()):
        table.create_tag(f"t{k}", snapshot_id=k)
    for k in sorted(before["tags"].keys() - after["tags"].keys()):
        table.delete_tag(f"t{k}")
    if after["snapshots"].keys() < before["snapshots"].keys():
        table.expire_snapshots()


def _compare(table, state: dict[str, Any]) -> None:
    assert [s.id for s in table.snapshots()] == sorted(state["snapshots"])
    for k in state["snapshots"]:
        assert _rows(table, k) == sorted(state["expected"][k]), k
    assert sorted(t.name for t in table.list_tags()) == sorted(f"t{k}" for k in state["tags"])
    for k in state["tags"]:
        got = sorted(table.to_arrow(tag=f"t{k}").column("row").to_pylist())
        assert got == sorted(state["expected"][k])
    expected_consumers = {"consumer": state["consumer"]} if state["consumer"] else {}
    assert table.consumers() == expected_consumers


@pytest.mark.parametrize("seed", [3, 11])
def test_spec_trace_replays_on_a_local_warehouse(tmp_path, seed):
    states = _trace(tmp_path, seed)
    table = create_table(tmp_path / "wh", schema=SCHEMA, options=OPTIONS)
    for before, after in itertools.pairwise(states):
        _replay_step(table, before, after)
        _compare(table, after)
    assert states[-1]["history"], "the trace committed nothing"
