"""Shared helpers for the benchmark scripts (not a test module)."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def summary_ms(values: Sequence[float]) -> str:
    """p50 / p99 / mean in milliseconds."""
    return (
        f"p50 {pct(values, 50) * 1000:7.2f} ms  p99 {pct(values, 99) * 1000:7.2f} ms  "
        f"mean {statistics.fmean(values) * 1000:7.2f} ms"
    )


def median(values: Sequence[float]) -> float:
    """Median."""
    return statistics.median(values)
