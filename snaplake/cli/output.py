"""Rendering for the ``snaplake`` command: text for people, one JSON document for scripts.

A command builds plain data (a list of row mappings or one record mapping)
and hands it to an :class:`Output`. :class:`TextOutput` draws it with rich
(tables, aligned ``key: value`` lines, a progress bar or spinner on stderr
while stdout is a terminal); :class:`JsonOutput` prints exactly one JSON
document on stdout and never anything else there.

This module imports nothing from the rest of snaplake.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import datetime as dt
import decimal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable
from rich.text import Text

__all__ = [
    "Column",
    "JsonOutput",
    "Output",
    "ProgressReporter",
    "RowsLayout",
    "TextOutput",
    "format_size",
    "format_time_ms",
    "to_json_bytes",
]

_LIST_PREVIEW = 20
"""Text output shows at most this many items of a list value (JSON shows all)."""


def format_time_ms(millis: int | None) -> str | None:
    """Render epoch milliseconds as a UTC ISO-8601 string (``2025-01-02T03:04:05.678Z``)."""
    if millis is None:
        return None
    stamp = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_size(size_bytes: int | None) -> str:
    """Render a byte count for people (``999 B``, ``1.5 KiB``, ``12.0 MiB``)."""
    if size_bytes is None:
        return "-"
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_json_bytes(document: Any) -> bytes:
    """Encode ``document`` as JSON (Decimal as string, bytes as base64, NaN as null)."""
    return orjson.dumps(
        document,
        default=_json_default,
        option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """How text output shows one key of the row mappings.

    Attributes:
        key: Key in each row mapping (and the JSON field name).
        header: Column header in text output.
        numeric: Right-align the column.
        fmt: Turns the raw value into the text shown (``None`` = ``str``).
    """

    key: str
    header: str
    numeric: bool = False
    fmt: Callable[[Any], str] | None = None


class ProgressReporter(abc.ABC):
    """Receives progress of a long run; :class:`Output.progress` gives one."""

    @abc.abstractmethod
    def advance(self, steps: int = 1, *, description: str | None = None) -> None:
        """Record ``steps`` more units of work done (and optionally relabel the bar)."""


class _NoProgress(ProgressReporter):
    def advance(self, steps: int = 1, *, description: str | None = None) -> None:
        del steps, description


class _RichProgress(ProgressReporter):
    def __init__(self, progress: Progress, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, steps: int = 1, *, description: str | None = None) -> None:
        if description is None:
            self._progress.advance(self._task, steps)
        else:
            self._progress.update(self._task, advance=steps, description=description)


@dataclass(frozen=True, slots=True, kw_only=True)
class RowsLayout:
    """How text output lays out a list of records (JSON output ignores it).

    Attributes:
        columns: Text columns, in order.
        title: A line above the table.
        empty: Shown instead of an empty table.
        note: A line below the table (e.g. "more rows not shown").
    """

    columns: Sequence[Column]
    title: str | None = None
    empty: str = "(none)"
    note: str | None = None


class Output(abc.ABC):
    """Where a command's result goes; each command calls ``rows`` or ``record`` once."""

    def rows(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        columns: Sequence[Column],
        title: str | None = None,
        empty: str = "(none)",
        note: str | None = None,
    ) -> None:
        """Emit a list of records (JSON: an array of objects; text: a table).

        Args:
            rows: The records; JSON gets every key, text only ``columns``.
            columns: Text columns, in order.
            title: Text only: a line above the table.
            empty: Text only: shown instead of an empty table.
            note: Text only: a line below the table (e.g. "more rows not shown").
        """
        self._rows(rows, RowsLayout(columns=columns, title=title, empty=empty, note=note))

    @abc.abstractmethod
    def _rows(self, rows: Sequence[Mapping[str, Any]], layout: RowsLayout) -> None:
        """Emit ``rows`` (:meth:`rows` with its arguments gathered in ``layout``)."""

    @abc.abstractmethod
    def record(self, record: Mapping[str, Any], *, title: str | None = None) -> None:
        """Emit one record (JSON: an object; text: aligned ``key: value`` lines)."""

    @contextlib.contextmanager
    def progress(self, *, total: int | None, description: str) -> Iterator[ProgressReporter]:
        """Show a progress bar for ``total`` steps while the block runs (text on a terminal)."""
        del total, description
        yield _NoProgress()

    @contextlib.contextmanager
    def status(self, message: str) -> Iterator[None]:
        """Show a spinner with ``message`` while the block runs (text on a terminal)."""
        del message
        yield


class JsonOutput(Output):
    """Writes exactly one JSON document to stdout per command."""

    def _emit(self, document: Any) -> None:
        sys.stdout.buffer.write(to_json_bytes(document))
        sys.stdout.flush()

    def _rows(self, rows: Sequence[Mapping[str, Any]], layout: RowsLayout) -> None:
        """Print ``rows`` as one JSON array of objects; see :meth:`Output.rows`."""
        del layout
        self._emit([dict(r) for r in rows])

    def record(self, record: Mapping[str, Any], *, title: str | None = None) -> None:
        """Print ``record`` as one JSON object."""
        del title
        self._emit(dict(record))


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_text_value(v)}" for k, v in value.items()) or "-"
    if isinstance(value, bytes):
        return value.hex() if len(value) <= 32 else value[:32].hex() + "…"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _is_bytes_key(key: str) -> bool:
    return key == "bytes" or key.startswith("bytes_") or key.endswith("_bytes")


def _label(key: str) -> str:
    """``commit_duration_s`` -> ``commit duration``; ``size_bytes`` -> ``size``."""
    for suffix in ("_s", "_bytes"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key.replace("_", " ")


class TextOutput(Output):
    """Draws results for people with rich; progress goes to stderr on a terminal only.

    Args:
        interactive: stdout is a terminal (enables colour, progress bars and
            spinners). When false the output is plain text, never wrapped.
    """

    def __init__(self, *, interactive: bool) -> None:
        self.interactive = interactive
        # Piped output must not be wrapped or truncated at 80 columns.
        self.console = Console(
            highlight=False, soft_wrap=not interactive, width=None if interactive else 100_000
        )
        self.err_console = Console(stderr=True, highlight=False)

    def _rows(self, rows: Sequence[Mapping[str, Any]], layout: RowsLayout) -> None:
        """Print ``rows`` as a table of ``layout.columns``; see :meth:`Output.rows`."""
        columns = layout.columns
        if layout.title:
            self.console.print(Text(layout.title, style="bold"))
        if not rows:
            self.console.print(Text(layout.empty, style="dim"))
        else:
            table = RichTable(box=None, show_edge=False, pad_edge=False, header_style="bold")
            for col in columns:
                table.add_column(
                    Text(col.header),
                    justify="right" if col.numeric else "left",
                    no_wrap=not self.interactive,
                )
            for row in rows:
                cells = []
                for col in columns:
                    raw = row.get(col.key)
                    shown = col.fmt(raw) if col.fmt is not None and raw is not None else None
                    cells.append(Text(shown if shown is not None else _text_value(raw)))
                table.add_row(*cells)
            self._print_table(table)
        if layout.note:
            self.console.print(Text(layout.note, style="dim"))

    def _print_table(self, table: RichTable) -> None:
        if self.interactive:
            self.console.print(table)
            return
        # Piped: no padding after the last column (friendlier to grep/awk/diff).
        with self.console.capture() as capture:
            self.console.print(table)
        lines = capture.get().splitlines()
        sys.stdout.write("".join(line.rstrip() + "\n" for line in lines))

    def record(self, record: Mapping[str, Any], *, title: str | None = None) -> None:
        """Print ``record`` as ``key: value`` lines; long lists show their first items."""
        if title:
            self.console.print(Text(title, style="bold"))
        labels = {k: _label(k) for k in record}
        width = max((len(v) for v in labels.values()), default=0)
        for key, value in record.items():
            label = f"{labels[key]}:".ljust(width + 2)
            if isinstance(value, list | tuple):
                self.console.print(Text(f"{label}{len(value)}"))
                for item in value[:_LIST_PREVIEW]:
                    self.console.print(Text(f"  {_text_value(item)}"))
                if len(value) > _LIST_PREVIEW:
                    more = len(value) - _LIST_PREVIEW
                    self.console.print(
                        Text(f"  … and {more} more (--output json lists all)", style="dim")
                    )
            elif _is_bytes_key(key) and isinstance(value, int):
                self.console.print(Text(f"{label}{format_size(value)}"))
            elif key.endswith("_s") and isinstance(value, int | float):
                self.console.print(Text(f"{label}{value:.3f} s"))
            else:
                self.console.print(Text(f"{label}{_text_value(value)}"))

    @contextlib.contextmanager
    def progress(self, *, total: int | None, description: str) -> Iterator[ProgressReporter]:
        """Show a transient rich progress bar on stderr when stdout is a terminal."""
        if not self.interactive:
            yield _NoProgress()
            return
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.err_console,
            transient=True,
        )
        with bar:
            task = bar.add_task(description, total=total)
            yield _RichProgress(bar, task)

    @contextlib.contextmanager
    def status(self, message: str) -> Iterator[None]:
        """Show a transient spinner on stderr when stdout is a terminal."""
        if not self.interactive:
            yield
            return
        with self.err_console.status(message):
            yield
