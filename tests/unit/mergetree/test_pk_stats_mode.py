"""``metadata.stats-mode`` (and ``.per.level``) on primary-key data files, as Java writes them.

Source: Paimon ``KeyValueFileWriterFactory`` (``statsModePerLevel`` falling back
to ``metadata.stats-mode``; key fields always ``truncate(128)``,
``StatsCollectorFactories``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows, to_table

from snaplake.errors import InvalidOptionError
from snaplake.store.format.binary_row import decode_binary_row


def _table(tmp_path: Path, **options: str) -> Any:
    return create_table(
        tmp_path, schema=PK_SCHEMA, primary_keys=PK_KEYS, options={"bucket": "1", **options}
    )


def _files(table: Any) -> list[Any]:
    return [f for s in table.new_scan().plan() for f in s.files]


def _bounds(table: Any, f: Any) -> tuple[list[Any], list[Any]]:
    types = table.schema().value_types
    return (
        list(decode_binary_row(f.value_stats.min_values, types)),
        list(decode_binary_row(f.value_stats.max_values, types)),
    )


def _load(table: Any) -> list[dict[str, Any]]:
    rows = make_rows(0, 50)
    for r in rows:
        r["name"] = f"a-rather-long-name-{r['id']:03d}"
    write_and_commit(table, to_table(rows))
    return rows


def test_stats_mode_none_counts_and_truncate(tmp_path: Path) -> None:
    none = _table(tmp_path / "none", **{"metadata.stats-mode": "none"})
    _load(none)
    (f,) = _files(none)
    assert f.value_stats.null_counts == (None,) * len(PK_SCHEMA)
    assert _bounds(none, f) == ([None] * 6, [None] * 6)
    assert f.key_stats.null_counts == (0, 0)  # keys keep truncate(128) whatever the mode

    counts = _table(tmp_path / "counts", **{"metadata.stats-mode": "counts"})
    rows = _load(counts)
    (f,) = _files(counts)
    assert f.value_stats.null_counts == tuple(
        sum(r[c] is None for r in rows) for c in PK_SCHEMA.names
    )
    assert _bounds(counts, f) == ([None] * 6, [None] * 6)

    short = _table(tmp_path / "short", **{"metadata.stats-mode": "truncate(4)"})
    _load(short)
    (f,) = _files(short)
    low, high = _bounds(short, f)
    assert low[2] == "a-ra" and high[2] == "a-rb"  # truncated, the max rounded up
    full = _table(tmp_path / "full", **{"metadata.stats-mode": "full"})
    _load(full)
    (f,) = _files(full)
    low, high = _bounds(full, f)
    assert low[2] == "a-rather-long-name-000" and high[2] == "a-rather-long-name-049"


def test_stats_mode_per_level(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"metadata.stats-mode.per.level": "0:none,5:full"})
    rows = _load(table)
    rows = _load(table)  # the same keys again: compaction merges (an upgraded file keeps its stats)
    assert all(f.level == 0 and _bounds(table, f) == ([None] * 6, [None] * 6)
               for f in _files(table))  # fmt: skip
    table.compact(full=True)
    (f,) = _files(table)
    assert f.level == 5
    low, high = _bounds(table, f)
    assert (low[1], high[1]) == (0, 49) and high[2] == "a-rather-long-name-049"
    assert sorted_rows(table.to_arrow()) == sorted(rows, key=lambda r: (r["month"], r["id"]))


@pytest.mark.parametrize(
    "options",
    [
        {"metadata.stats-mode.per.level": "0:everything"},
        {"metadata.stats-mode.per.level": "zero:none"},
        {"changelog-file.stats-mode": "truncate(0)"},
    ],
)
def test_bad_stats_modes_are_refused_at_create(tmp_path: Path, options: dict[str, str]) -> None:
    with pytest.raises(InvalidOptionError):
        _table(tmp_path, **options)
