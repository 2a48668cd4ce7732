"""The public surface: ``__all__`` is exactly the public names, sorted, and all resolve."""

from __future__ import annotations

import subprocess
import sys

import snaplake


def test_all_is_sorted_and_resolves():
    assert snaplake.__all__ == sorted(snaplake.__all__)
    for name in snaplake.__all__:
        assert getattr(snaplake, name) is not None


def test_import_is_light():
    heavy = ("pyarrow.dataset", "pandas", "boto3", "pyspark", "apscheduler")
    code = f"import sys, snaplake; print(any(m in sys.modules for m in {heavy!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
