"""Input files of ``snaplake write``: Parquet and CSV rows, with errors naming the file.

A write of several files is one commit; when one of them cannot be read or
does not fit the table, the error names that file (and for a CSV value that
does not convert: its column and row), so the user knows which to fix.

Source: pyarrow's CSV reader (``pyarrow.csv.read_csv`` with ``column_types``)
and Parquet reader (``ParquetFile.iter_batches``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

__all__ = [
    "CSV_SUFFIXES",
    "InputFileError",
    "is_csv",
    "read_csv",
    "input_batches",
    "read_parquet_schema",
]

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zst", ".tsv")
_PARQUET_BATCH_ROWS = 256 * 1024
_CSV_COLUMN = re.compile(r"In CSV column #(\d+)")


class InputFileError(click.ClickException):
    """An input file of ``write`` cannot be read or does not fit the table (exit code 1).

    Printed like the group's other errors: ``error: <file>: <what is wrong>``.
    Nothing has been committed when it is raised; the command deletes the
    data files it already wrote.
    """

    exit_code = 1

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``error: <message>`` on stderr."""
        click.echo(f"error: {self.format_message()}", err=True, file=file)


def is_csv(path: Path, file_format: str) -> bool:
    """Tell whether ``path`` is read as CSV (``--format``, or by its suffix when ``auto``)."""
    if file_format != "auto":
        return file_format == "csv"
    return path.name.lower().endswith(CSV_SUFFIXES)


def read_parquet_schema(path: Path, *, option: str) -> pa.Schema:
    """Return the Arrow schema of Parquet file ``path`` (without its metadata).

    Args:
        path: The file ``option`` names.
        option: The command-line option that names it, for the message.

    Raises:
        click.BadParameter: the file is not a readable Parquet file
            (exit code 2); for a CSV name the message says to convert it.
    """
    try:
        return pq.read_schema(path).remove_metadata()
    except (pa.ArrowException, OSError) as exc:
        if is_csv(path, "auto"):
            why = (
                "a CSV file has no column types to create a table from; save a sample of it "
                "as Parquet for the schema, then 'snaplake write' appends the CSV rows"
            )
        else:
            why = _arrow_message(exc)
        raise click.BadParameter(
            f"{path} is not a Parquet file: {why}", param_hint=option
        ) from None


def _arrow_message(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _first_bad_row(values: pa.Array, target: pa.DataType) -> int | None:
    """Index of the first non-null string in ``values`` that does not cast to ``target``."""

    def fails(chunk: pa.Array) -> bool:
        try:
            pc.cast(chunk, target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return True
        return False

    if not fails(values):
        return None
    lo, hi = 0, len(values)  # invariant: values[lo:hi] holds a failing value
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(values.slice(lo, mid - lo)):
            hi = mid
        else:
            lo = mid
    return lo


def _csv_conversion_error(
    path: Path, schema: pa.Schema, parse: pacsv.ParseOptions, exc: BaseException
) -> InputFileError:
    """Name the column and row of a CSV value that does not convert, when they can be found."""
    message = _arrow_message(exc)
    match = _CSV_COLUMN.search(message)
    if match is None:
        return InputFileError(path, message)
    try:
        as_text = pacsv.read_csv(
            path,
            parse_options=parse,
            convert_options=pacsv.ConvertOptions(
                column_types={f.name: pa.string() for f in schema}, strings_can_be_null=True
            ),
        )
    except (pa.ArrowException, OSError):
        return InputFileError(path, message)
    index = int(match.group(1))
    if index >= as_text.num_columns:
        return InputFileError(path, message)
    name = as_text.column_names[index]
    target = schema.field(name).type if name in schema.names else None
    row = None
    if target is not None:
        row = _first_bad_row(as_text.column(name).combine_chunks(), target)
    if row is None:
        return InputFileError(path, f"column {name!r}: {message}")
    value = as_text.column(name)[row].as_py()
    return InputFileError(
        path,
        f"column {name!r}, row {row + 1} (not counting the header): {value!r} is not a "
        f"valid {target} value",
    )


def read_csv(path: Path, schema: pa.Schema) -> pa.Table:
    """Read a CSV file with the table's column types, then cast to them exactly.

    Args:
        path: A ``.csv`` (optionally compressed) or ``.tsv`` file with a header row.
        schema: The table's Arrow schema; columns are matched by name.

    Returns:
        The rows, typed as the table's columns (other columns as read).

    Raises:
        InputFileError: the file cannot be parsed, or a value does not
            convert (naming the column and row).
    """
    delimiter = "\t" if path.name.lower().endswith(".tsv") else ","
    parse = pacsv.ParseOptions(delimiter=delimiter)
    try:
        data = pacsv.read_csv(
            path,
            parse_options=parse,
            convert_options=pacsv.ConvertOptions(
                column_types={f.name: f.type for f in schema}, strings_can_be_null=True
            ),
        )
    except pa.ArrowInvalid as exc:
        raise _csv_conversion_error(path, schema, parse, exc) from exc
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(path, _arrow_message(exc)) from exc
    columns = []
    for name in data.column_names:
        col = data.column(name)
        index = schema.get_field_index(name)
        if index >= 0 and col.type != schema.field(index).type:
            try:
                col = col.cast(schema.field(index).type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise InputFileError(path, f"column {name!r}: {_arrow_message(exc)}") from exc
        columns.append(col)
    return pa.Table.from_arrays(columns, names=data.column_names)


def input_batches(
    path: Path, *, csv: bool, schema: pa.Schema
) -> Iterator[pa.Table | pa.RecordBatch]:
    """The rows of one input file, in batches (CSV values read with the table's ``schema``).

    Raises:
        InputFileError: the file cannot be read.
    """
    if csv:
        yield read_csv(path, schema)
    else:
        yield from _parquet_batches(path)


def _parquet_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Yield the record batches of a Parquet file; a read failure names the file."""
    try:
        # Only reading happens inside this try: the caller's write errors never pass a yield.
        yield from pq.ParquetFile(path).iter_batches(batch_size=_PARQUET_BATCH_ROWS)
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(path, f"not a readable Parquet file: {_arrow_message(exc)}") from exc
