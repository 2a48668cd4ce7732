"""The daemon's process set-up for a small RSS (in fresh interpreters: it changes the process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from tests.daemon.procs import REPO

from snaplake.daemon.memory import release_memory, trim_malloc

_PROBE = textwrap.dedent(
    """
    import json, sys
    from snaplake.daemon.memory import limit_malloc_arenas, prepare_process
    prepare_process(polars={polars})
    import pyarrow as pa
    import pyarrow.dataset  # imports pandas when it can
    limit_malloc_arenas()
    pa.array([1, 2, 3])  # pyarrow's pandas check
    import snaplake.compaction.append_rewrite as ac
    from snaplake.store.format import avro_columnar
    try:
        import pandas  # noqa: F401
        pandas_importable = True
    except ImportError:
        pandas_importable = False
    print(json.dumps({{
        "pandas_loaded": "pandas" in sys.modules,
        "pandas_importable": pandas_importable,
        "pool": pa.default_memory_pool().backend_name,
        "columnar": avro_columnar.columnar_available(),
        "compaction_polars": ac._polars() is not None,
    }}))
    """
)


def _probe(*, polars: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(polars=polars)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.integration
def test_prepare_process_skips_pandas_and_polars_and_uses_the_system_allocator():
    seen = _probe(polars=False)
    assert seen == {
        "pandas_loaded": False,
        "pandas_importable": False,
        "pool": "system",
        "columnar": False,
        "compaction_polars": False,
    }


@pytest.mark.integration
def test_polars_can_be_kept():
    pytest.importorskip("polars")
    seen = _probe(polars=True)
    assert seen["pandas_loaded"] is False
    assert seen["columnar"] is True
    assert seen["compaction_polars"] is True


_TRIM_PROBE = textwrap.dedent(
    """
    import json, os
    from snaplake.daemon.memory import trim_malloc
    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    blocks = [bytearray(4000) for _ in range(50_000)]  # ~200 MB from glibc's heap
    keep = bytearray(4000)  # above them: free() alone cannot shrink the heap
    del blocks
    before = rss()
    trim_malloc()
    print(json.dumps({"before": before, "after": rss()}))
    """
)


@pytest.mark.integration
@pytest.mark.skipif(sys.platform != "linux", reason="glibc malloc_trim and /proc/self/statm")
def test_trim_malloc_hands_freed_heap_pages_back_to_the_os():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", _TRIM_PROBE], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    rss = json.loads(out.stdout.strip().splitlines()[-1])
    assert rss["before"] - rss["after"] > 100 << 20  # most of the ~200 MB freed


def test_release_memory_releases_arrow_pool_and_trims(monkeypatch):
    import pyarrow as pa

    from snaplake.daemon import memory

    calls: list[str] = []

    class Pool:
        def release_unused(self) -> None:
            calls.append("arrow")

    monkeypatch.setattr(pa, "default_memory_pool", Pool)
    monkeypatch.setattr(memory, "trim_malloc", lambda: calls.append("glibc"))
    release_memory()
    assert calls == ["arrow", "glibc"]
    trim_malloc()  # the real one: harmless at any time
