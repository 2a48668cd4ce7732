"""Shared helpers for the benchmark scripts (not a test module)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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


def status_mib() -> dict[str, float]:
    """This process's ``VmRSS`` and ``VmHWM`` (peak RSS) from ``/proc/self/status``, MiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def reset_peak() -> float:
    """Set ``VmHWM`` to the current RSS (``clear_refs`` 5, Linux); return that RSS in MiB."""
    before = status_mib()["VmRSS"]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return before


_NEIGHBOUR = """
import os, sys
directory, total = sys.argv[1], int(sys.argv[2])
chunk = b"\\x01" * (8 << 20)
k = 0
while True:
    path = os.path.join(directory, f"neighbour-{k}.bin")
    with open(path, "wb") as f:
        for _ in range(total // len(chunk)):
            f.write(chunk)
    if k:
        os.unlink(os.path.join(directory, f"neighbour-{k - 1}.bin"))
    k += 1
"""


@contextmanager
def neighbour_writer(directory: Path, *, total_bytes: int = 2 << 30) -> Iterator[None]:
    """Run a process that writes ``total_bytes`` to ``directory`` in 8 MiB chunks, without fsync.

    It starts the next file when one is written and deletes the one before, so
    its dirty pages stay in the page cache for the whole ``with`` block; it is
    stopped (by pid) and its files removed when the block ends.
    """
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", _NEIGHBOUR, str(directory), str(total_bytes)])
    try:
        time.sleep(1.0)  # let it fill the page cache first
        yield
    finally:
        proc.kill()
        proc.wait()
        for leftover in directory.glob("neighbour-*.bin"):
            leftover.unlink()
