"""The README's code blocks, and where each one is run (issue 18, item 12).

Every fenced block of ``README.md`` is classified here, and a test fails for a
block no rule covers, so a new block is either run or excluded with a reason:

- ``python``: run in order in one namespace by ``tests/unit/test_readme.py``
  (placeholders for the user's data defined there, the warehouse rewritten to
  a temporary directory);
- ``spark``: Python blocks using ``snaplake.spark``, run in the shared
  SparkSession of ``tests/spark/test_read_write.py``;
- ``cli``: the ``snaplake`` commands of the "Command line" section, run by
  ``tests/spark/test_demo.py`` against the warehouse ``make demo`` builds;
- ``toml``: daemon configurations, parsed by the daemon's own parser in
  ``tests/unit/test_readme.py``;
- ``not run``: the blocks in :data:`NOT_RUN`, each with its reason.

A rewrite (:func:`rewrite`) must find the text it replaces, so a README edit
that moves a path or port fails the test instead of running something else.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

README = Path(__file__).resolve().parents[1] / "README.md"

NOT_RUN: dict[str, str] = {
    "make demo": (
        "the make targets: `make test` is what CI runs, and tests/spark/test_demo.py runs "
        "the demo itself (CI size)"
    ),
    "prometheus --config.file=grafana/prometheus.yml": (
        "starts Prometheus and a Grafana container that run until stopped (no Docker here); "
        "tests/daemon/test_dashboard.py runs Prometheus on grafana/prometheus.yml and checks "
        "the dashboard"
    ),
}
"""Blocks not run, by the start of their first line, with the reason."""

ARROW_SCHEMA = pa.schema(
    [
        ("year", pa.int32()),
        ("month", pa.int32()),
        ("day", pa.int32()),
        ("carrier", pa.string()),
        ("flight", pa.int32()),
        ("origin", pa.string()),
        ("dest", pa.string()),
        ("air_time", pa.float64()),
        ("distance", pa.float64()),
    ]
)
"""The reader's ``arrow_schema`` in the README: flights, as in ``make demo``."""

SPARK_DDL = (
    "year int, month int, day int, carrier string, flight int, origin string, dest string, "
    "air_time double, distance double"
)
""":data:`ARROW_SCHEMA` as a Spark DDL string (the README Spark block's ``schema``)."""


def flights() -> pa.Table:
    """Six flights of :data:`ARROW_SCHEMA` in three months (distinct primary keys)."""
    return pa.table(
        {
            "year": [2013] * 6,
            "month": [1, 1, 1, 2, 2, 3],
            "day": [1, 1, 2, 1, 1, 5],
            "carrier": ["AA", "UA", "AA", "DL", "UA", "B6"],
            "flight": [11, 1545, 11, 461, 1696, 507],
            "origin": ["JFK", "EWR", "JFK", "LGA", "EWR", "EWR"],
            "dest": ["MIA", "IAH", "MIA", "ATL", "ORD", "FLL"],
            "air_time": [160.0, 227.0, 158.0, 116.0, 150.0, 158.0],
            "distance": [1089.0, 1400.0, 1089.0, 762.0, 719.0, 1065.0],
        },
        schema=ARROW_SCHEMA,
    )


_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced code block.

    Attributes:
        line: 1-based line of the opening fence.
        lang: The fence's info string (``python``, ``bash``, ``toml``, ...).
        code: The text between the fences.
        section: The nearest ``##``/``###`` heading above it.
    """

    line: int
    lang: str
    code: str
    section: str

    @property
    def first_line(self) -> str:
        """The first non-empty line."""
        return next(line for line in self.code.splitlines() if line.strip())

    @property
    def kind(self) -> str:
        """``python``, ``spark``, ``cli``, ``toml`` or ``not run`` (see the module docstring).

        Raises:
            AssertionError: no rule covers the block.
        """
        if any(self.first_line.startswith(start) for start in NOT_RUN):
            return "not run"
        if self.lang == "python":
            return "spark" if "snaplake.spark" in self.code else "python"
        if self.lang == "toml":
            return "toml"
        if self.lang == "bash" and all(line.startswith("snaplake ") for line in self.lines()):
            return "cli"
        raise AssertionError(
            f"README.md:{self.line} ({self.lang} block in {self.section!r}) is run by no test: "
            "make tests/readme_blocks.py classify it, or add it to NOT_RUN with the reason"
        )

    def lines(self) -> list[str]:
        """The non-empty lines, without trailing ``# comments``."""
        out = []
        for line in self.code.splitlines():
            text = re.sub(r"\s+#.*$", "", line).strip()
            if text:
                out.append(text)
        return out


def readme_blocks(path: Path = README) -> list[Block]:
    """Every fenced code block of ``path``, in order."""
    blocks: list[Block] = []
    section = ""
    lang: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if lang is None:
            if line.startswith(("## ", "### ")):
                section = line.lstrip("#").strip()
            match = _FENCE.match(line)
            if match is not None:
                lang, start, body = match.group(1), number, []
        elif line.startswith("```"):
            blocks.append(
                Block(line=start, lang=lang, code="\n".join(body) + "\n", section=section)
            )
            lang = None
        else:
            body.append(line)
    assert lang is None, f"{path}: the block at line {start} is not closed"
    return blocks


def blocks_of(kind: str) -> list[Block]:
    """The README blocks of one kind, in order."""
    return [b for b in readme_blocks() if b.kind == kind]


def rewrite(block: Block, replacements: Mapping[str, str]) -> str:
    """``block.code`` with each key replaced by its value; every key must occur.

    Raises:
        AssertionError: a key is not in the block (the README changed: update the test).
    """
    code = block.code
    for old, new in replacements.items():
        assert old in code, f"README.md:{block.line}: {old!r} is no longer in the block"
        code = code.replace(old, new)
    return code


def cli_commands(block: Block, *, warehouse: str) -> list[list[str]]:
    """The block's ``snaplake`` commands as argument lists, ``./warehouse`` -> ``warehouse``."""
    return [shlex.split(line.replace("./warehouse", warehouse)) for line in block.lines()]
