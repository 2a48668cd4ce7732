"""Keep the daemon's resident memory small: lean imports, one allocator, memory handed back.

The daemon is a long-running, mostly idle process next to the writers; its
budget is about 200 MiB RSS (issue 5's soak). What costs memory, measured on
Linux with ``/proc/self/smaps`` while it maintains a table with a fast writer:

- **pandas** (about 33 MiB): nothing in the daemon uses it, but pyarrow imports
  it on ``import pyarrow.dataset`` and on the first ``pa.array`` of Python
  objects, only to check whether a value is a pandas object.
- **polars** (about 45 MiB of its shared library alone, plus one thread per
  core and its own jemalloc heap): only a faster reader (of data files in
  small-file compaction, of very large manifests); both have pyarrow /
  fastavro fallbacks that the library takes when polars is missing.
- **Arrow's default pool** (mimalloc): ``pa.set_memory_pool`` changes only
  pyarrow's default, while Arrow's C++ code (Parquet and dataset readers)
  keeps allocating from mimalloc, which kept 40 MiB after one compaction.
  ``ARROW_DEFAULT_MEMORY_POOL=system`` changes both, if set before pyarrow
  is loaded.
- **glibc malloc**: one arena per thread keeps freed memory, and after the
  first large buffer is freed glibc raises its mmap threshold (up to 32 MiB)
  and its trim threshold with it, so later large buffers come from the
  arenas, whose top chunks ``malloc_trim`` does not release: 80 MiB stayed
  resident in a 60 s soak although 13 MiB were in use. Two arenas, fixed
  thresholds (buffers from 256 KiB on are mapped and unmapped on their own)
  and ``malloc_trim`` after each job keep it at what is in use.

:func:`prepare_process` must run before the first ``import pyarrow`` of the
process (``snaplake.daemon.run`` calls it before it imports the scheduler);
:func:`limit_malloc_arenas` before the worker threads start; and
:func:`release_memory` after each maintenance job.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import types
from collections.abc import Sequence
from contextlib import suppress

__all__ = [
    "SKIPPED_MODULES",
    "limit_malloc_arenas",
    "prepare_process",
    "release_memory",
    "trim_malloc",
]

logger = logging.getLogger(__name__)

SKIPPED_MODULES: tuple[str, ...] = ("pandas",)
"""Top-level packages the daemon process never imports (pyarrow works without them)."""

# glibc mallopt parameters (malloc.h) and the values the daemon sets.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_ARENAS = 2
_MMAP_THRESHOLD_BYTES = 256 << 10
_TRIM_THRESHOLD_BYTES = 1 << 20


class _SkipImports(importlib.abc.MetaPathFinder):
    """Make ``import <name>`` fail with ``ModuleNotFoundError`` for the given packages.

    Libraries that treat the package as optional (pyarrow's pandas shim,
    snaplake's polars readers) then take their fallback path.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top in self.names:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (not loaded by the snaplake daemon)", name=fullname
            )
        return None


def prepare_process(*, polars: bool = False, pandas: bool = False) -> None:
    """Set the process up for a small RSS; call before pyarrow is first imported.

    Sets ``ARROW_DEFAULT_MEMORY_POOL=system`` (unless the environment already
    chooses a pool) and refuses imports of :data:`SKIPPED_MODULES`, and of
    polars unless ``polars`` is true. A package that is already imported
    stays usable; refusing it then would only break its users.

    Args:
        polars: Let the daemon use polars' readers (faster compaction of many
            small files and decoding of very large manifests, for about 60 MiB
            more RSS).
        pandas: Let pandas be imported (the Spark Connect client of
            ``[tasks.compact] engine = "spark"`` needs it).
    """
    if "pyarrow" in sys.modules:
        logger.debug("pyarrow already loaded: ARROW_DEFAULT_MEMORY_POOL has no effect")
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    names = [n for n in SKIPPED_MODULES if not (pandas and n == "pandas")]
    names += [] if polars else ["polars"]
    skip = [n for n in names if n not in sys.modules]
    if skip and not any(isinstance(f, _SkipImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _SkipImports(skip))


def limit_malloc_arenas() -> None:
    """Cap glibc's malloc arenas, fix its thresholds, and use it for Arrow buffers.

    Every job, scan and delete pool thread would otherwise get its own arena
    that keeps freed memory: with a dozen threads the RSS of a long-running
    daemon grows several-fold although little is live. Fixed mmap and trim
    thresholds stop glibc from moving large buffers into the arenas (see the
    module docstring). The glibc part is a no-op elsewhere.
    """
    import pyarrow as pa  # the daemon's caller may not have loaded it yet

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_ARENA_MAX, _ARENAS)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        logger.debug("mallopt unavailable; malloc arenas not limited")
        return
    # Arrow's default pool (mimalloc/jemalloc) keeps freed pages for reuse, which
    # suits a query engine, not a mostly idle daemon (see prepare_process for
    # the C++ side).
    pa.set_memory_pool(pa.system_memory_pool())


def trim_malloc() -> None:
    """Hand freed heap memory back to the OS (glibc ``malloc_trim``; no-op elsewhere)."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def release_memory() -> None:
    """Return what Arrow's pool and glibc hold but no longer use; call after a job.

    Costs a few milliseconds (``malloc_trim`` walks the arenas).
    """
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        with suppress(AttributeError):
            pa.default_memory_pool().release_unused()
    trim_malloc()
