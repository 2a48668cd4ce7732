"""The commit protocol's Quint specification (spec/commit.qnt) is checked in ``make test``.

``quint test`` runs the spec's unit tests; ``quint run`` (the TypeScript simulator: the Rust
evaluator and Apalache are downloads not available offline) checks every invariant over the
protocol as implemented, with a fixed seed. Each broken variant (no conflict check, publish by
exists-then-rename, expiry ignoring consumers, a retry trusting files orphan clean may have
deleted) must be caught twice over: by a unit test of module ``brokenVariants`` that drives the
exact interleaving its rule exists for and expects the guarantee violated (deterministic), and
by a simulation that is not told the interleaving (the full step for the first two, which find
it at any seed tried; a step of only the actions the rule is about for the last two, which the
full step reaches only at some seeds). The npm install lives in spec/.quint
(``make spec-quint``); the module is skipped when it is absent.
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
    module: str,
    *,
    samples: int,
    steps: int,
    seed: int,
    invariant: str = "AllGuarantees",
    step: str = "step",
) -> subprocess.CompletedProcess[str]:
    return _quint(
        "run", "--main", module, "--step", step, "--invariant", invariant,
        "--max-samples", str(samples), "--max-steps", str(steps), "--seed", str(seed),
    )  # fmt: skip


def test_spec_unit_tests_pass():
    done = _quint("test", "--main", "checked", "--max-samples", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passing" in done.stdout, done.stdout


def test_protocol_keeps_every_guarantee():
    done = _simulate("checked", samples=200, steps=40, seed=7)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No violation found" in done.stdout


def test_each_broken_variant_violates_its_guarantee_in_its_scenario():
    done = _quint("test", "--main", "brokenVariants", "--max-samples", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passing" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("variant", "invariant", "step", "samples", "steps"),
    [
        ("noConflictCheck", "CompactionNeverResurrectsOrDropsRows", "step", 1000, 40),
        ("existsThenRename", "AcknowledgedCommitsNeverLost", "step", 1000, 40),
        ("expiryIgnoresConsumers", "RetainedFilesExist", "targetedStep", 200, 20),
        ("retryTrustsFiles", "RetainedFilesExist", "targetedStep", 200, 20),
    ],
)
def test_broken_variant_is_caught_by_simulation(variant, invariant, step, samples, steps):
    done = _simulate(variant, samples=samples, steps=steps, seed=7, invariant=invariant, step=step)
    assert done.returncode != 0, done.stdout
    assert "Invariant violated" in done.stdout + done.stderr
