"""The local publish barrier: how to make one commit's files durable, quiet and next to a writer.

Usage: python benchmarks/publish_barrier.py [--rounds 200] [--dir DIR]

One commit writes a data file (~45 KB, in a new ``month=<m>/bucket-0``), a
manifest (~4 KB), two manifest lists (~1 KB) and the snapshot's temp file,
then links the snapshot and fsyncs its directory. Timed: writing those files
and publishing them durably, per strategy, the strategies interleaved round by
round, (a) on a quiet filesystem and (b) while a neighbour process writes 2 GiB
in 8 MiB chunks without fsync to the same filesystem:

- ``syncfs``: no per-file sync; one ``syncfs(2)`` of the filesystem before the
  link (snaplake before issue 11; flushes the neighbour's pages too);
- ``serial``: ``fdatasync`` each file and ``fsync`` its directories in turn;
- ``o_dsync``: every file written with ``O_DSYNC``, directories fsynced;
- ``concurrent``: ``LocalFileIO.publish`` (what snaplake does): the files, the
  temp file and the directories synced at once from a thread pool.

Figures on a shared machine are noisy; compare strategies within one run.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from _common import neighbour_writer, pct

from snaplake.store.io.local_file_io import LocalFileIO

_LIBC = ctypes.CDLL(None, use_errno=True)
SIZES = (("data", 45_000), ("manifest", 4_000), ("manifest", 1_000), ("manifest", 900))


def _files(base: Path, i: int) -> list[tuple[str, bytes]]:
    out = []
    for kind, size in SIZES:
        directory = base / f"month={i}" / "bucket-0" if kind == "data" else base / "manifest"
        directory.mkdir(parents=True, exist_ok=True)
        out.append((str(directory / f"{kind}-{uuid.uuid4().hex}"), os.urandom(size)))
    return out


def _dirs(base: Path, files: list[tuple[str, bytes]]) -> list[str]:
    dirs: set[str] = set()
    for path, _ in files:
        d = os.path.dirname(path)
        while d != str(base):
            dirs.add(d)
            d = os.path.dirname(d)
    return sorted({*dirs, str(base)})


def _write(path: str, data: bytes, flags: int = 0) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _sync(path: str, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        (os.fsync if directory else os.fdatasync)(fd)
    finally:
        os.close(fd)


def _link(base: Path, i: int, *, before_link: Callable[[str, str], None], flags: int = 0) -> None:
    """Write the snapshot's temp file, run ``before_link(tmp, dir)``, link, fsync the dir."""
    snap_dir = base / "snapshot"
    snap_dir.mkdir(exist_ok=True)
    tmp = str(snap_dir / f".snapshot-{i}.{uuid.uuid4().hex}.tmp")
    _write(tmp, b"s" * 1500, flags)
    before_link(tmp, str(snap_dir))
    os.link(tmp, str(snap_dir / f"snapshot-{i}"))
    os.unlink(tmp)
    _sync(str(snap_dir), directory=True)


def _syncfs(tmp: str, directory: str) -> None:
    del tmp
    fd = os.open(directory, os.O_RDONLY)
    try:
        _LIBC.syncfs(fd)
    finally:
        os.close(fd)


def syncfs(base: Path, i: int) -> None:
    for path, data in _files(base, i):
        _write(path, data)
    _link(base, i, before_link=_syncfs)


def serial(base: Path, i: int) -> None:
    files = _files(base, i)
    for path, data in files:
        _write(path, data)
        _sync(path)
    for d in _dirs(base, files):
        _sync(d, directory=True)
    _link(base, i, before_link=lambda tmp, _: _sync(tmp))


def o_dsync(base: Path, i: int) -> None:
    files = _files(base, i)
    for path, data in files:
        _write(path, data, os.O_DSYNC)
    for d in _dirs(base, files):
        _sync(d, directory=True)
    _link(base, i, before_link=lambda tmp, _: None, flags=os.O_DSYNC)


_IO = LocalFileIO()


def concurrent(base: Path, i: int) -> None:
    files = _files(base, i)
    for path, data in files:
        _write(path, data)
    _IO.publish(
        str(base / "snapshot" / f"snapshot-{i}"),
        b"s" * 1500,
        files=[p for p, _ in files],
        directories=_dirs(base, files),
    )


STRATEGIES: dict[str, Callable[[Path, int], None]] = {
    "syncfs": syncfs,
    "serial": serial,
    "o_dsync": o_dsync,
    "concurrent": concurrent,
}


def measure(work: Path, rounds: int) -> dict[str, list[float]]:
    """Per strategy, seconds per commit; strategies interleaved round by round."""
    times: dict[str, list[float]] = {name: [] for name in STRATEGIES}
    for i in range(rounds):
        for name, fn in STRATEGIES.items():
            base = work / name
            base.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            fn(base, i)
            times[name].append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-barrier-", dir=args.dir))
    quiet = measure(work / "quiet", args.rounds)
    with neighbour_writer(work / "neighbour"):
        busy = measure(work / "busy", args.rounds)
    print(f"publish barrier of one commit (4 files + snapshot), {args.rounds} rounds, {work}")
    print(f"  {'strategy':12s} {'quiet p50':>10s} {'p90':>8s}   {'neighbour p50':>13s} {'p90':>8s}")
    for name in STRATEGIES:
        q, b = quiet[name], busy[name]
        print(
            f"  {name:12s} {pct(q, 50) * 1000:8.2f}ms {pct(q, 90) * 1000:6.2f}ms   "
            f"{pct(b, 50) * 1000:11.2f}ms {pct(b, 90) * 1000:6.2f}ms"
        )


if __name__ == "__main__":
    main()
