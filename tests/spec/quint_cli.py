"""Running the Quint CLI on spec/commit.qnt (TypeScript backend: works offline)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec" / "commit.qnt"
QUINT = ROOT / "spec" / ".quint" / "node_modules" / ".bin" / "quint"


def quint(*args: str) -> subprocess.CompletedProcess[str]:
    """``quint <args> --backend typescript spec/commit.qnt``, output captured."""
    return subprocess.run(
        [str(QUINT), *args, "--backend", "typescript", str(SPEC)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )  # fmt: skip


def simulate(
    module: str,
    *,
    samples: int,
    steps: int,
    seed: int,
    invariant: str = "AllGuarantees",
    step: str = "step",
) -> subprocess.CompletedProcess[str]:
    """``quint run`` of ``module`` checking ``invariant`` with a fixed seed."""
    return quint(
        "run", "--main", module, "--step", step, "--invariant", invariant,
        "--max-samples", str(samples), "--max-steps", str(steps), "--seed", str(seed),
    )  # fmt: skip
