"""Shared helpers of the daemon tests: small tables with many commits."""

from __future__ import annotations

import itertools

from tests.helpers import create_table, rows, write_and_commit

from snaplake.table import Table

_names = itertools.count()

LOW_THRESHOLDS = {
    "manifest.merge-min-count": "4",
    "target-file-size": "1 mb",
    "compaction.min.file-num": "3",
    "snapshot.num-retained.min": "3",
    "snapshot.num-retained.max": "6",
    "snapshot.time-retained": "1 ms",
}


def memory_table(options: dict[str, str] | None = None, *, name: str = "db.t") -> Table:
    """A fresh in-memory partitioned table."""
    return create_table(
        f"memory://daemon{next(_names)}", name, partition_keys=["month"], options=options
    )


def append(table: Table, n_commits: int, *, start: int = 0, rows_per_commit: int = 5,
           months: int = 1, user: str = "writer") -> int:  # fmt: skip
    """Make ``n_commits`` append commits; return the next free id."""
    committer = table.new_commit(commit_user=user)
    ident = start
    for _ in range(n_commits):
        write_and_commit(
            table,
            rows(ident, rows_per_commit, months=months),
            commit_user=user,
            commit_identifier=ident + 1,
            committer=committer,
        )
        ident += rows_per_commit
    return ident
