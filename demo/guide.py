"""What the flights demo tells its user: why it pauses, and what to try once it has finished.

Kept apart from the demo's flow (``flights_demo.py``) so that flow stays readable; every
command printed here is one a user can paste (``tests/spark/test_demo.py`` runs them).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cli_command", "next_steps", "safe_options"]

_SECRET_MARKERS = ("secret", "token", "access-key", "password")


def safe_options(options: Mapping[str, str]) -> dict[str, str]:
    """Catalog options that may be printed (never credentials)."""
    return {k: v for k, v in options.items() if not any(m in k.lower() for m in _SECRET_MARKERS)}


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def cli_command() -> str:
    """How to run the ``snaplake`` command from here (the venv's script if it is not on PATH)."""
    script = Path(sys.executable).parent / "snaplake"
    on_path = any(
        (Path(d) / "snaplake").resolve() == script.resolve()
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and (Path(d) / "snaplake").exists()
    )
    if on_path or not script.exists():
        return "snaplake"
    return _shown_path(script)


def next_steps(
    *, warehouse: str, table: str, listen: str, options: Mapping[str, str], serving: bool
) -> str:
    """The closing text of the demo: CLI commands on ``table``, then daemon + dashboards.

    Args:
        warehouse: The warehouse the demo wrote (absolute path or URI).
        table: ``db.table`` the demo made.
        listen: The metrics address the demo's daemon used.
        options: Catalog options (S3); credentials are left out.
        serving: The demo is about to keep the daemon running (``--serve``).
    """
    database = table.split(".")[0]
    base = [cli_command(), "--warehouse", warehouse]
    for key, value in safe_options(options).items():
        base += ["--option", f"{key}={value}"]
    cli = shlex.join(base)
    hidden = sorted(set(options) - set(safe_options(options)))
    creds = (
        f"  (add your credentials: {', '.join(hidden)} are not printed; or use the AWS "
        "environment)\n"
        if hidden
        else ""
    )
    toml_options = ", ".join(f'"{k}" = "{v}"' for k, v in safe_options(options).items())
    toml = (
        f'[metrics]\\nlisten = "{listen}"\\n\\n[[warehouse]]\\nuri = "{warehouse}"\\n'
        f'tables = ["{database}.*"]\\n'
        + (f"options = {{ {toml_options} }}\\n" if toml_options else "")
    )
    script = _shown_path(Path(__file__).with_name("flights_demo.py"))
    demo = shlex.join(
        [_shown_path(Path(sys.executable)), script, "--warehouse", warehouse, "--serve"]
    )
    daemon_line = (
        "  the daemon keeps running below (Ctrl-C stops it); point Prometheus and Grafana at it:\n"
        if serving
        else f"  {demo}\n"
        "      re-runs the demo, then keeps the daemon and its metrics up until Ctrl-C; or,\n"
        "      for the table as it is now:\n"
        f"  printf '{toml}' > snaplake.toml\n"
        f"  {shlex.join([cli_command(), 'daemon', '--config', 'snaplake.toml'])}\n"
    )
    return (
        f"\nwhat to try next ({table} stays in {warehouse}; a re-run drops and replaces it):\n"
        f"{creds}"
        f"  {cli} tables {database}\n"
        f"  {cli} read {table} --filter 'month = 7 and distance > 2500' --limit 5\n"
        f"  {cli} snapshots {table}\n"
        f"  {cli} --output json files {table}\n"
        f"  {cli} expire-snapshots {table}  # a plan; --execute acts\n"
        f"\nmaintenance daemon, Prometheus and the Grafana dashboard:\n"
        f"{daemon_line}"
        "  prometheus --config.file=grafana/prometheus.yml "
        "--storage.tsdb.path=/tmp/snaplake-prom\n"
        f"      scrapes the daemon at {listen} (edit the target in grafana/prometheus.yml if\n"
        f"      you changed --metrics-listen); then load grafana/dashboards/snaplake.json in\n"
        f"      Grafana (provisioning files in grafana/provisioning; README section\n"
        f'      "Maintenance daemon and dashboards")\n'
    )
