"""The broken variants of spec/commit.qnt are caught (see test_commit_spec.py for the scheme).

Each variant drops one key rule and must be caught twice over: by its scenario test in module
``brokenVariants`` (deterministic) and by a simulation not told the interleaving.
"""

from __future__ import annotations

import pytest
from tests.spec.quint_cli import QUINT, quint, simulate

pytestmark = pytest.mark.skipif(not QUINT.exists(), reason="run `make spec-quint` first")


def test_each_broken_variant_violates_its_guarantee_in_its_scenario():
    done = quint("test", "--main", "brokenVariants", "--max-samples", "1")
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
    done = simulate(variant, samples=samples, steps=steps, seed=7, invariant=invariant, step=step)
    assert done.returncode != 0, done.stdout
    assert "Invariant violated" in done.stdout + done.stderr
