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
(``make spec-quint``); the module is skipped when it is absent. The broken variants' checks are
in test_commit_spec_variants.py (a second module, so that ``-n 2`` runs the two on both cores).
"""

from __future__ import annotations

import pytest
from tests.spec.quint_cli import QUINT, quint, simulate

pytestmark = pytest.mark.skipif(not QUINT.exists(), reason="run `make spec-quint` first")


def test_spec_unit_tests_pass():
    done = quint("test", "--main", "checked", "--max-samples", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passing" in done.stdout, done.stdout


def test_protocol_keeps_every_guarantee():
    done = simulate("checked", samples=200, steps=40, seed=7)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No violation found" in done.stdout
