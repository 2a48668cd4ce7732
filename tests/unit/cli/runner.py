"""In-process runner of the ``snaplake`` command for the CLI tests."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

from snaplake.cli import cli


class Snaplake:
    """Runs ``snaplake --warehouse WH ...`` in-process with click's CliRunner."""

    def __init__(self, warehouse: str) -> None:
        self.warehouse = warehouse
        self.runner = CliRunner()

    def __call__(self, *args: str, expect: int | None = 0) -> Result:
        result = self.runner.invoke(cli, ["--warehouse", self.warehouse, *args])
        if expect is not None:
            assert result.exit_code == expect, (result.exit_code, result.stdout, result.stderr)
        return result

    def json(self, *args: str) -> Any:
        result = self("--output", "json", *args)
        return json.loads(result.stdout)
