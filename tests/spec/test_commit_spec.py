"""The commit protocol's Quint specification (spec/commit.qnt) is checked in ``make test``.

``quint test`` runs the spec's unit tests; ``quint run`` (the TypeScript simulator: the Rust
evaluator and Apalache are downloads not available offline) checks every invariant over the
protocol as implemented, with fixed seeds; each broken variant (no conflict check, publish by
exists-then-rename, expiry ignoring consumers) must be caught. The npm install lives in
spec/.quint (``make spec-quint``); the module is skipped when it is absent.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec" / "commit.qnt"
QUINT = ROOT / "spec" / ".quint" / "node_modules" / ".bin" / "quint"

pytestmark = pytest.mark.skipif(not QUINT.exists(), reason="run `make spec-quint` first")


def _quint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(QUINT), *args, "--backend", "typescript", str(SPEC)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )  # fmt: skip


def _simulate(
    module: str, *, samples: int, steps: int, seed: int, invariant: str = "AllGuarantees"
):
    return _quint(
        "run", "--main", module, "--invariant", invariant,
        "--max-samples", str(samples), "--max-steps", str(steps), "--seed", str(seed),
    )  # fmt: skip


def test_spec_unit_tests_pass():
    done = _quint("test", "--main", "checked", "--max-samples", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "7 passing" in done.stdout, done.stdout


def test_protocol_keeps_every_guarantee():
    done = _simulate("checked", samples=200, steps=40, seed=7)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No violation found" in done.stdout


# Each variant must break the guarantee its rule protects (seed 7 finds all three).
@pytest.mark.parametrize(
    ("variant", "invariant"),
    [
        ("noConflictCheck", "CompactionNeverResurrectsOrDropsRows"),
        ("existsThenRename", "AcknowledgedCommitsNeverLost"),
        ("expiryIgnoresConsumers", "RetainedFilesExist"),
    ],
)
def test_broken_variant_is_caught(variant, invariant):
    done = _simulate(variant, samples=1000, steps=40, seed=7, invariant=invariant)
    assert done.returncode != 0, done.stdout
    assert "Invariant violated" in done.stdout + done.stderr
