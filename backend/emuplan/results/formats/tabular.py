"""Tables with a header row, as the table formats (``results.formats``: per-iteration, KAI summary, per-flow)
share them: CSV read by Arrow, typed and checked access to the columns that play each role
(``headers.map_columns``; times with their unit in the header, a ``unit`` column or the cells as
``"14.2 ms"``), the samples of a table with one completion time a row, and each iteration's completion
rebuilt from its flows (per-flow tables and ns-3's fct.txt).

Parsing is pyarrow's (multi-threaded C++) and every check is a numpy operation over whole columns;
only when a check fails is the first offending row looked up, to name it in the message.
"""

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from emuplan.results.canonical import (
    INT64_LIMIT,
    ParsedResult,
    ResultFileError,
    collective_from_file_name,
    collective_of,
    renamed_text,
    samples_table,
    text_column,
    times_problem,
)
from emuplan.results.formats import PER_ITERATION, headers
from emuplan.results.formats.upload import content_of

# (row index) → "line 7" for CSV (header is line 1), "row 6" for Feather.
RowName = Callable[[int], str]

_VALUE_WITH_UNIT = r"^\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-zµμ]*)\s*$"


def csv_line(index: int) -> str:
    return f"line {index + 2}"


def table_row(index: int) -> str:
    return f"row {index + 1}"


# Only an empty cell is missing: 'NaN' or 'NA' must reach the checks and be reported as what they are.
# Text columns arrive dictionary-encoded: cheap for millions of repeated collective names.
CONVERT_OPTIONS = pacsv.ConvertOptions(null_values=[""], strings_can_be_null=False, auto_dict_encode=True)


def read_csv(source: bytes | memoryview | Path, head: bytes, file_name: str) -> pa.Table:
    """Parse CSV bytes or a CSV file (``head``: its first bytes, for the delimiter); a row with the wrong
    number of fields is reported with its line number."""
    bad_rows: list[str] = []
    delimiter = sniff_delimiter(head)

    def on_invalid_row(row) -> str:
        where = (
            f"line {row.number}"
            if row.number is not None
            else _line_with_field_count(source, delimiter, row.actual_columns)
        )
        bad_rows.append(
            f"{file_name}: {where} has {row.actual_columns} fields where the header has {row.expected_columns}"
        )
        return "error"

    options = {
        "parse_options": pacsv.ParseOptions(delimiter=delimiter, invalid_row_handler=on_invalid_row),
        "convert_options": CONVERT_OPTIONS,
    }
    try:
        if isinstance(source, Path):
            # Opened as it is (no compression guessed from the name: gzip was undone before) and read a block
            # at a time: the file's bytes are never all in memory.
            try:
                return read_csv_in_first_block_types(source, delimiter)
            except pa.ArrowInvalid:
                pass  # a type that changes further down, a bad row: read whole, which widens types and names the row
            with pa.OSFile(str(source)) as file:
                return pacsv.read_csv(file, **options)
        return pacsv.read_csv(pa.py_buffer(source), **options)
    except (pa.ArrowInvalid, pa.ArrowKeyError) as error:
        if bad_rows:
            raise ResultFileError(bad_rows[0]) from error
        message = str(error).splitlines()[0]
        if "Empty CSV file" in message:
            raise ResultFileError(_why_no_rows(content_of(source), file_name)) from error
        raise ResultFileError(f"{file_name}: not a readable CSV table ({message})") from error


def read_csv_in_first_block_types(path: Path, delimiter: str) -> pa.Table:
    """The table ``pacsv.read_csv`` gives, read by Arrow's multi-threaded reader in the column types that
    the first block shows (``delimiter``: ``read_csv``'s sniff). Converting to given types takes ~30% less
    CPU than inferring them block by block (dictionaries above all), and with Arrow's pool handing back
    the parse's scratch the read holds less beside the table than streaming it a block at a time did (2M
    rows, 111 MB: the read's peak 190-220 MB above the process's RSS, against 230-260 MB streamed).

    A later block that does not fit those types (an integer column with a fraction further down, a
    malformed row) raises ``pa.ArrowInvalid``, and ``pacsv.read_csv`` — which widens types block by block
    and names the bad row — has to read the file instead."""
    parse_options = pacsv.ParseOptions(delimiter=delimiter)
    with (
        pa.OSFile(str(path)) as file,
        pacsv.open_csv(file, parse_options=parse_options, convert_options=CONVERT_OPTIONS) as first_block,
    ):
        schema = first_block.schema
    typed = pacsv.ConvertOptions(
        null_values=CONVERT_OPTIONS.null_values,
        strings_can_be_null=CONVERT_OPTIONS.strings_can_be_null,
        column_types=schema,
    )
    with pa.OSFile(str(path)) as file:
        table = pacsv.read_csv(file, parse_options=parse_options, convert_options=typed)
    chunks = [column.chunks for column in table.columns]
    del table
    # Arrow's allocator (mimalloc) keeps freed pages for a second before handing them back: the parse's
    # scratch, then the blocks, would stay resident under everything the import does next (~100 MB at
    # 2M rows). Handed back at once, before the columns are joined and again after.
    pool = pa.default_memory_pool()
    pool.release_unused()
    # Each column in one piece (dictionaries unified), made one at a time and its blocks let go at once:
    # the reading holds the table plus one column, and later steps need not copy the column again.
    columns = []
    for index in range(len(chunks)):
        columns.append(pa.chunked_array(chunks[index], schema.field(index).type).combine_chunks())
        chunks[index] = []
    pool.release_unused()
    return pa.Table.from_arrays(columns, schema=schema)


def _why_no_rows(data: bytes | memoryview, file_name: str) -> str:
    """What Arrow calls an empty CSV file: really empty, or one line with nothing below it."""
    if not bytes(data).strip():
        return f"{file_name}: the file is empty"
    return (
        f"{file_name}: line 1 is the only line ({len(data)} bytes, no data row below it): a result table needs "
        "a header row and at least one data row"
    )


DELIMITERS = (",", ";", "\t", "|")


def sniff_delimiter(head: bytes) -> str:
    """The delimiter the header row (at the start of ``head``) uses most: ',' unless it is ';'
    (spreadsheets with decimal commas), tab or '|'."""
    header = head[:4096].split(b"\n", 1)[0].decode("utf-8", errors="replace")
    return max(DELIMITERS, key=header.count) if any(d in header for d in DELIMITERS) else ","


def _line_with_field_count(source: bytes | memoryview | Path, delimiter: str, count: int) -> str:
    """Error path only: find the first line whose field count is ``count`` (pyarrow may not know its number)."""
    import csv

    text = bytes(content_of(source)).decode("utf-8", errors="replace")
    for number, fields in enumerate(csv.reader(io.StringIO(text), delimiter=delimiter), start=1):
        if number > 1 and len(fields) == count:
            return f"line {number}"
    return "a line"


def mapped_columns(
    table: pa.Table, file_name: str, column_map: dict[str, str] | None
) -> dict[str, headers.MappedColumn]:
    """The role each column plays (what the table formats recognise), by header or ``column_map``."""
    try:
        mapped = headers.map_columns(table.column_names, column_map)
    except ValueError as error:
        raise ResultFileError(f"{file_name}: {error}") from error
    for column in mapped.values():
        positions = [number for number, name in enumerate(table.column_names, start=1) if name == column.name]
        if len(positions) > 1:
            raise ResultFileError(
                f"{file_name}: the header names {column.name!r} {len(positions)} times (columns "
                f"{', '.join(map(str, positions))}): rename all but one"
            )
    return mapped


class Columns:
    """Typed, validated access to the mapped columns of one table. ``first_units``: the unit each role's cells
    state on the file's first row (the table may be one block of a file read a block at a time,
    ``results.streaming.streamed``, which passes the same dict to every block); the table's first row states it when the
    dict has none, and it is noted there."""

    def __init__(
        self,
        table: pa.Table,
        mapped: dict[str, headers.MappedColumn],
        file_name: str,
        row_name: RowName,
        first_units: dict[str, str] | None = None,
    ):
        self.table = table
        self.mapped = mapped
        self.file_name = file_name
        self.row_name = row_name
        self.first_units = {} if first_units is None else first_units
        self.warnings: list[str] = []
        self._combined: dict[str, pa.Array] = {}

    def has(self, role: str) -> bool:
        return role in self.mapped

    def header(self, role: str) -> str:
        return self.mapped[role].name

    def fail(self, role: str, index: int, problem: str) -> ResultFileError:
        return ResultFileError(f"{self.file_name}: {self.row_name(index)}, column {self.header(role)!r}: {problem}")

    def raw(self, role: str) -> pa.Array:
        """The column in one piece (the CSV reader gives a chunk per block), combined once per role; a
        column already in one piece is taken as it is (``combine_chunks`` would copy it)."""
        if role not in self._combined:
            column = self.table.column(self.header(role))
            self._combined[role] = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        return self._combined[role]

    def plain(self, role: str) -> pa.Array:
        """The column with dictionary encoding undone (for text that has to become numbers)."""
        column = self.raw(role)
        return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column

    def numbers(self, role: str, *, allow_null: bool = False) -> np.ndarray:
        """A numeric column as float64; nulls are NaN when allowed, an error otherwise."""
        column = self.plain(role)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = self._cast_text(role, column)
        elif not (
            pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_null(column.type)
        ):
            raise self.fail(role, 0, f"expected numbers, the column holds {column.type}")
        values = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
        if not allow_null and column.null_count:
            raise self.fail(role, int(np.flatnonzero(np.isnan(values))[0]), "the cell is empty")
        return values

    def _cast_text(self, role: str, column: pa.Array) -> pa.Array:
        try:
            return pc.cast(column, pa.float64())
        except pa.ArrowInvalid:
            for index, text in enumerate(column.to_pylist()):
                try:
                    float(text)
                except (TypeError, ValueError):
                    raise self.fail(role, index, f"{text!r} is not a number") from None
            raise

    def durations_us(self, role: str) -> np.ndarray:
        """A time column in µs. The unit comes from the header, a ``unit`` column or the cells themselves."""
        mapped = self.mapped[role]
        column = self.plain(role)
        if mapped.scale is None and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            values, scale = self._values_with_units(role, column)
        else:
            values = self.numbers(role)
            scale = mapped.scale if mapped.scale is not None else self._unit_column_scale(role)
        with np.errstate(over="ignore"):  # an overflow becomes inf, which the check names
            values_us = values * scale
        self.check_times(role, values, values_us, durations=role == "duration")
        return values_us

    def check_times(self, role: str, values: np.ndarray, values_us: np.ndarray, *, durations: bool = True) -> None:
        """Checked once in µs (a huge count of seconds overflows only there), reported as the file wrote it."""
        problem = times_problem(values_us, durations=durations)
        if problem is not None:
            index, what = problem
            if np.isinf(values_us[index]) and np.isfinite(values[index]):
                what = "too large to count in µs (check the unit)"
            raise self.fail(role, index, f"{float(values[index])!r} is not a valid time: {what}")

    def _values_with_units(self, role: str, column: pa.Array) -> tuple[np.ndarray, float]:
        parts = pc.extract_regex(column, _VALUE_WITH_UNIT)
        if parts.null_count:
            index = int(np.flatnonzero(parts.is_null().to_numpy(zero_copy_only=False))[0])
            raise self.fail(role, index, f"{column[index].as_py()!r} is not a number with a unit")
        unit = self._one_unit(role, parts.field("unit"))
        scale = self._unit_column_scale(role) if unit == "" else self._scale_of(role, unit)
        return pc.cast(parts.field("value"), pa.float64()).to_numpy(zero_copy_only=False), scale

    def _one_unit(self, role: str, units: pa.Array) -> str:
        """The unit every row states, the file's first row's (``first_units``); mixed units are an error naming
        the first row that differs."""
        units = pc.utf8_lower(pc.utf8_trim_whitespace(units.cast(pa.string()).fill_null("")))
        first = self.first_units.setdefault(role, units[0].as_py())
        differs = pc.not_equal(units, first).to_numpy(zero_copy_only=False)
        if differs.any():
            index = int(np.flatnonzero(differs)[0])
            raise self.fail(
                role, index, f"mixed units: {units[index].as_py()!r} here but {first!r} on the first row; use one unit"
            )
        return first

    def _scale_of(self, role: str, unit: str) -> float:
        scale = headers.unit_scale_us(unit)
        if scale is None:
            raise self.fail(role, 0, f"unknown time unit {unit!r} (use ns, us, ms or s)")
        return scale

    def _unit_column_scale(self, role: str) -> float:
        if not self.has("unit"):
            raise ResultFileError(
                f"{self.file_name}: column {self.header(role)!r} has no time unit: name it with a suffix "
                "such as '(ms)', '_us' or '_ns', or add a 'unit' column"
            )
        return self._scale_of("unit", self._one_unit("unit", self.plain("unit")))

    def sizes(self) -> pa.Array | None:
        """Byte counts as int64 (nulls where a cell is empty): whole, not negative, below 2^63."""
        if not self.has("size"):
            return None
        scale = self.mapped["size"].scale or 1
        column = self.plain("size")
        if pa.types.is_signed_integer(column.type) and scale == 1:
            # Whole numbers within int64 already: only the sign is left to check.
            negative = pc.index(pc.less(column, 0), True).as_py()
            if negative >= 0:
                raise self.fail("size", negative, f"{float(column[negative].as_py())!r} is not a byte count")
            return column.cast(pa.int64())
        values = self.numbers("size", allow_null=True)
        bad = (values < 0) | (np.isfinite(values) & (values != np.round(values)))
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            raise self.fail("size", index, f"{float(values[index])!r} is not a byte count")
        values_bytes = values * scale
        too_large = values_bytes >= INT64_LIMIT
        if too_large.any():
            index = int(np.flatnonzero(too_large)[0])
            raise self.fail("size", index, f"{float(values[index])!r} bytes is more than a size can hold (2^63 − 1)")
        return nullable(values_bytes, pa.int64())

    def iterations(self) -> np.ndarray | None:
        if not self.has("iteration"):
            return None
        column = self.plain("iteration")
        if pa.types.is_signed_integer(column.type) and not column.null_count:
            return column.to_numpy().astype(np.int64, copy=False)  # whole numbers within int64 already
        values = self.numbers("iteration")
        bad = (values != np.round(values)) | (np.abs(values) >= INT64_LIMIT)
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            raise self.fail(
                "iteration", index, f"{float(values[index])!r} is not an iteration number (a whole number below 2^63)"
            )
        return values.astype(np.int64)

    def queue_pairs(self) -> pa.Array | None:
        """QP numbers as int64 (nulls where a cell is empty): whole, not negative, below 2^63."""
        if not self.has("qp"):
            return None
        values = self.numbers("qp", allow_null=True)
        bad = (values < 0) | (np.abs(values) >= INT64_LIMIT) | (np.isfinite(values) & (values != np.round(values)))
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            raise self.fail("qp", index, f"{float(values[index])!r} is not a queue pair number (a whole number ≥ 0)")
        return nullable(values, pa.int64())

    def text(self, role: str) -> pa.DictionaryArray | None:
        return text_column(self.raw(role), self.table.num_rows) if self.has(role) else None

    def collectives(self, override: str | None, file_name: str) -> pa.Array | str:
        """Collective names folded to CollectiveOp values; unknown spellings are kept as written."""
        if override:
            return override
        if not self.has("collective"):
            op = collective_from_file_name(file_name)
            if op is None:
                self.warnings.append(f"{file_name}: no collective column: the collective is recorded as 'unknown'")
                return "unknown"
            return op
        # 'AllReduce' and 'all_reduce' fold to one value, and so form one group.
        return renamed_text(self.text("collective"), collective_of)


def _optional_numbers(reader: Columns, role: str) -> np.ndarray | None:
    return reader.numbers(role, allow_null=True) if reader.has(role) else None


def nullable(values: np.ndarray | None, arrow_type: pa.DataType) -> pa.Array | None:
    if values is None:
        return None
    mask = np.isnan(values)
    return pa.array(values, mask=mask if mask.any() else None).cast(arrow_type)


def samples_from_columns(reader: Columns, fmt: str, collective: str | None, column_map) -> ParsedResult:
    """The samples of a table with one completion time a row (per-iteration, KAI summary)."""
    durations = headers.ambiguous_durations(reader.table.column_names, column_map)
    if len(durations) > 1:
        raise ResultFileError(
            f"{reader.file_name}: several columns look like the completion time ({', '.join(map(repr, durations))}); "
            "choose one with the column mapping (duration=<column>)"
        )
    if not reader.has("duration"):
        raise ResultFileError(
            f"{reader.file_name}: no completion-time column found among {reader.table.column_names} "
            "(expected e.g. 'Completion Time (ms)', 'cct_ms', 'time_us', 'duration_ns')"
        )
    duration_us = reader.durations_us("duration")
    iteration = reader.iterations()
    if iteration is None and fmt == PER_ITERATION:
        reader.warnings.append(f"{reader.file_name}: no iteration column: the row order is the iteration order")
    start_us = None
    if reader.has("start"):
        start = reader.numbers("start", allow_null=True)
        scale = reader.mapped["start"].scale or reader.mapped["duration"].scale or 1.0
        start_us = start * scale
    return ParsedResult(
        samples=samples_table(
            duration_us=duration_us,
            iteration=iteration,
            collective=reader.collectives(collective, reader.file_name),
            size_bytes=reader.sizes(),
            start_us=nullable(start_us, pa.float64()),
            variant=reader.text("variant") or "",
            label=reader.text("label") or "",
            algbw_gbps=nullable(_optional_numbers(reader, "algbw"), pa.float64()),
            busbw_gbps=nullable(_optional_numbers(reader, "busbw"), pa.float64()),
            ideal_pct=nullable(_optional_numbers(reader, "ideal"), pa.float64()),
        ),
        source_format=fmt,
        warnings=reader.warnings,
    )


def iterations_from_flows(flows: pa.Table, collective: pa.Array | str, warnings: list[str]) -> pa.Table:
    """Per-iteration completion = max(end) − min(start) over the iteration's flows (the fct alone without starts)."""
    if not isinstance(collective, str):
        first = collective[0].as_py() if len(collective) else "unknown"
        if len(pc.unique(collective)) > 1:
            warnings.append("flows name several collectives: iterations are labelled with the first one")
        collective = first
    with_end = flows.append_column("end_us", pc.add(flows["start_us"], flows["fct_us"]))
    grouped = (
        with_end.group_by("iteration")
        .aggregate([("start_us", "min"), ("end_us", "max"), ("fct_us", "max"), ("size_bytes", "sum")])
        .sort_by("iteration")
    )
    start = grouped["start_us_min"].to_numpy(zero_copy_only=False)
    if np.isnan(start.astype(np.float64)).all() if len(start) else False:
        duration = grouped["fct_us_max"].to_numpy(zero_copy_only=False)
        warnings.append("flows have no start times: each iteration's completion is its longest flow")
        start_column = None
    else:
        duration = grouped["end_us_max"].to_numpy(zero_copy_only=False) - start
        start_column = start
    return samples_table(
        duration_us=np.asarray(duration, dtype=np.float64),
        iteration=grouped["iteration"].to_numpy(),
        collective=collective,
        size_bytes=None,
        start_us=start_column,
    )
