"""ValueStatsCollector over any split into batches equals compute_value_stats over the whole."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from snaplake.store.format.stats import ValueStatsCollector, compute_value_stats
from snaplake.store.format.types import parse_type, to_arrow_type

_COLUMNS: list[tuple[str, st.SearchStrategy[object]]] = [
    ("BOOLEAN", st.booleans()),
    ("INT", st.integers(-(2**31), 2**31 - 1)),
    ("BIGINT", st.integers(-(2**63), 2**63 - 1)),
    ("DOUBLE", st.floats(allow_nan=True, allow_infinity=True)),
    ("FLOAT", st.floats(width=32)),
    ("STRING", st.text(max_size=24)),
    ("BYTES", st.binary(max_size=24)),
    ("DATE", st.dates(min_value=dt.date(1, 1, 1))),
    ("TIMESTAMP(6)", st.datetimes(min_value=dt.datetime(1900, 1, 1))),
    ("DECIMAL(12, 3)", st.integers(-(10**12) + 1, 10**12 - 1).map(lambda u: Decimal(u) / 1000)),
]
_MODES = st.sampled_from(["truncate(16)", "truncate(2)", "full", "counts", "none"])


@st.composite
def _table_and_cuts(draw: st.DrawFn) -> tuple[pa.Table, list[str], list[int]]:
    columns = draw(st.lists(st.sampled_from(_COLUMNS), min_size=1, max_size=4))
    n = draw(st.integers(0, 30))
    arrays = {}
    types = []
    for i, (type_name, values) in enumerate(columns):
        dtype = parse_type(type_name)
        cells = draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
        arrays[f"c{i}"] = pa.array(cells, to_arrow_type(dtype))
        types.append(type_name)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=5)))
    return pa.table(arrays), types, cuts


@settings(max_examples=300, deadline=None)
@given(_table_and_cuts(), _MODES)
def test_batches_give_the_stats_of_the_whole(case, mode):
    table, type_names, cuts = case
    types = [parse_type(t) for t in type_names]
    collector = ValueStatsCollector(types, stats_mode=mode)
    bounds = [0, *cuts, table.num_rows]
    for lo, hi in itertools.pairwise(bounds):
        collector.update(table.slice(lo, hi - lo))  # empty slices included
    assert collector.result() == compute_value_stats(table, types, stats_mode=mode)
