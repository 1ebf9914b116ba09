"""Huge result files imported in bounded memory: read a block at a time, stored as they are read, and
summarised from an out-of-core sort, with the same figures the in-memory import gives.

Which files: a per-iteration or per-flow table on disk — a CSV, a gzip CSV, a Feather/Arrow IPC file or stream,
a Parquet file — or an ns-3 ``fct.txt`` (plain or gzip) larger than ``ImportLimits.streamed_above_bytes``
(EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES) on disk or once decompressed (``stream_blocks.is_large``). The rest stay in
memory: KAI summaries (a row per size), nccl-tests logs and ``-J`` reports, NCCL Inspector dumps and profiler
traces (a line per size or call: small by nature), a gzip of anything but a CSV. A stored run summarised again
(relabelled, linked to a plan) whose rows loaded whole would pass that threshold: ``stored_result`` copies its
tables to disk a row group at a time.

How, in memory that does not grow with the file (``ImportLimits.streamed_memory_bytes``, charged once to the
import's budget):

1. ``stream_blocks`` gives a block at a time (about ``_block_bytes``): Arrow's CSV reader (``pyarrow.csv.open_csv``;
   a gzip decompressed as it is read), an Arrow IPC file's record batches cut to size, a Parquet file's batches.
   Each block is checked and converted by the in-memory import's own code (``parse.parse_table``,
   ``formats.per_flow.flows_of``, ``formats.ns3_fct.flows_of``) with its rows numbered from the block's first
   (a CSV's line, a table's row), so a bad cell is named by file, row and column as before (an fct.txt's bad
   line by ``ns3_fct.refusal``, as in memory); the canonical rows are appended to the run's Parquet table on disk
   (what the database then stores). Times whose cells state their unit must state the file's first row's unit in
   every block (``tabular.Columns.first_units``): a later block in another unit is refused as in memory. A CSV
   column whose type changes further down (an integer column with a fraction, a number column with a word) is
   read again from the start as the wider type, as Arrow's whole-file reader would have read it. The containers
   keep their caps: what a gzip, Feather or Parquet file decompresses to counts against
   ``max_decompressed_bytes`` (not held: it passes on with its block), charged from the metadata before any batch
   is decompressed where there are some, and a Feather batch too large to decompress within the streamed memory
   is refused before it is.
   A plain per-flow CSV whose times carry their unit in the header is first read by DuckDB's own CSV reader
   instead (``_flows_by_duckdb``: multi-threaded, columns typed up front, ``flows_of``' checks in the same
   query): a 10 M-row upload's server CPU went from 10.3 to 9.0–9.3 s. Any cell it refuses sends the file to the
   block reader, which names it (file, line, column) as before. A streamed import holds no row, so it is not
   capped by rows (EMUPLAN_MAX_IMPORT_ROWS bounds the rows an in-memory import holds); its memory setting and
   the disk bound it.
2. DuckDB reads that Parquet back. Per group (collective, size, variant) its count and mean, then the samples
   ORDER BY group, time: a sort that spills to disk past DuckDB's memory limit, streamed past once in Arrow
   batches, picking the values at ranks known from each group's count (min, p50 … p99.9, max, the ECDF grid's
   ~2000 ranks): the same order statistics as numpy's sort of the whole column — exact, no spike sampled away.
   The same for all samples together and for the flows' completion times; the standard deviation from the
   squared deviations summed on that pass (float rounding apart, numpy's figures). DuckDB out of its memory is
   ``ResultFileTooLarge`` (413, naming the setting), its spill's disk full ``ImportDiskFull`` (507, TMPDIR).
3. Per-flow files and fct.txt: the iterations (max(end) − min(start) per iteration) and the receiving endpoints' last
   bytes (stragglers) are DuckDB group-bys (they spill too); the stragglers' per-rank sums are added up a
   block of iterations at a time.

Why DuckDB: measured on this 2-core machine (20 M doubles in 4 groups, from Parquet, sorted and streamed out):
DuckDB's ORDER BY with a 200 MB limit took 8.7 s at a peak RSS of 351 MB; polars 2.1's streaming engine
(``sort`` then ``collect_batches``) 29.9 s and 1,029 MB — its sort holds the data. Quantile aggregates
(DuckDB's ``quantile_disc``, polars' ``quantile``) are holistic: they hold each group's values and do not
spill; a sort does, and one pass over it gives every rank at once. Arrow's dataset scanner streams but does
not sort.

The delay series (time per iteration: every trial above p99.9, each bucket's fastest and slowest) is
``stats.delay_series`` of the group's samples in iteration order, as in memory, for groups of up to
``DELAY_ROWS_IN_MEMORY`` samples; a larger group first keeps the smallest and largest sample of each of
``DELAY_BUCKETS_PER_POINT`` × points iteration buckets and the trials above its p99.9 that the series keeps,
and ``stats.delay_series`` draws from those.
"""

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from emuplan.results.analysis.stats import (
    CURVE_POINTS,
    REPORTED_FIGURES,
    SLOWEST_KEPT,
    SPIKE_SHARE,
    NetworkModel,
    curve_points,
    delay_series,
    describe_ranks,
    described_ranks,
    ecdf_of,
    ecdf_ranks,
    group_entry,
    group_rates,
    reported_figures,
)
from emuplan.results.analysis.stragglers import (
    FLOW_BASIS,
    add_column_sums,
    column_entries,
    column_sums,
    natural_key,
    rank_headline,
)
from emuplan.results.budget import DEFAULT_STREAMED_MEMORY_BYTES, ImportBudget, ImportDiskFull
from emuplan.results.canonical import (
    FLOWS_SCHEMA,
    LONGEST_TIME_US,
    SAMPLES_SCHEMA,
    SHORTEST_TIME_US,
    TEXT,
    ResultFileError,
    ResultFileTooLarge,
    renamed_text,
    samples_table,
)
from emuplan.results.formats import (
    BY_NAME,
    DETECTION_ORDER,
    STREAMED_FORMATS,
    Format,
    format_module,
    headers,
    tabular,
)
from emuplan.results.parse import parse_table
from emuplan.results.streaming import stream_blocks

# CSV text parsed at a time: 1/128 of the import's memory, at most MAX_BLOCK_BYTES. Arrow's block reader holds
# blocks read ahead besides the one being checked: measured (3 M rows) 57 MB at 1 MiB blocks, 107 MB at 2 MiB,
# 183 MB at 4 MiB and 201 MB at 8 MiB; larger blocks cost less per row to check.
MAX_BLOCK_BYTES = 8 << 20
MIN_BLOCK_BYTES = 64 << 10
# Rows of a sorted result fetched from DuckDB at a time.
FETCH_ROWS = 1 << 18
# Flows fetched at a time from DuckDB's CSV reader (each a row group of the flows table): 3 M flows under a
# 200 MiB setting peaked at 194–212 MiB with FETCH_ROWS, 166–169 MiB with these (Arrow's block reader: ~172).
READ_ROWS = 1 << 16
# Share of the streamed import's memory DuckDB may use before it spills; the rest holds a block of the table
# being checked, a fetched batch and Arrow's buffers.
DUCKDB_SHARE = 0.35
DELAY_ROWS_IN_MEMORY = 4_000_000
# Flows whose stragglers' cells are grouped at a time (``_iteration_ranges``): ~4 M cells' group-by and sort fit
# the import's DuckDB memory without spilling.
ITERATION_RANGE_ROWS = 4_000_000
EVERY_ITERATION = (-(2**63), 2**63 - 1)
DELAY_BUCKETS_PER_POINT = 4


def parquet_write_options(schema: pa.Schema) -> dict:
    """How a run's tables are written to Parquet (``pq.write_table``/``ParquetWriter`` options): LZ4, column
    statistics only for the iterations (each row group's first and last: ``_iteration_ranges`` reads a range's
    row groups alone), each column in the encoding made for its type: dictionary pages only for the text
    columns (which already are dictionaries: trying one on millions of distinct durations is what made writing
    slow), the bytes of floats split into streams (LZ4 then finds the repeated exponents) and integers as
    deltas. 2M samples: 17.5 MB in 0.11 s CPU against 26.2 MB in 0.16 s with PLAIN floats and integers, and
    read back 2-3x faster."""
    encodings = {}
    for column in schema:
        if pa.types.is_floating(column.type):
            encodings[column.name] = "BYTE_STREAM_SPLIT"
        elif pa.types.is_integer(column.type):
            encodings[column.name] = "DELTA_BINARY_PACKED"
    return {
        "compression": "lz4",
        "write_statistics": [name for name in ("iteration",) if name in schema.names],
        "use_dictionary": [column.name for column in schema if pa.types.is_dictionary(column.type)],
        "column_encoding": encodings,
    }


@dataclass
class StreamedResult:
    """A huge file read into Parquet tables on disk (``samples``; ``flows`` for per-flow files), with what the
    summary needs beside them; ``summarise_streamed`` gives the summary ``stats.summarise`` would."""

    source_format: str
    tables: dict[str, Path]
    row_counts: dict[str, int]
    directory: Path
    memory_bytes: int
    file_name: str = ""
    ranks: int | None = None
    hosts: int | None = None
    warnings: list[str] = field(default_factory=list)
    # The values of each group key column in the order they first appear: the in-memory groups' order.
    key_order: dict[str, list] = field(default_factory=dict)


def streams(source: object, fmt: str | None, budget: ImportBudget) -> bool:
    """Whether ``source`` is a file large enough to be read streamed (``stream_blocks.is_large``: on disk or
    once decompressed), and could be a table of a streamed format (``streamed_result_file`` then reads its
    header to tell)."""
    if not isinstance(source, Path) or fmt not in (None, *STREAMED_FORMATS):
        return False
    with source.open("rb") as file:
        head = file.read(4096)
    return stream_blocks.is_large(source, head, budget.limits.streamed_above_bytes)


@contextmanager
def streamed_result_file(
    path: Path,
    file_name: str,
    fmt: str | None,
    column_map: dict[str, str] | None,
    collective: str | None,
    budget: ImportBudget,
) -> Iterator[StreamedResult | None]:
    """The file read into Parquet tables in a temporary directory (deleted on exit), or None when it is not a
    per-iteration or per-flow table nor an ns-3 fct.txt (the in-memory import then reads it, and names what is
    wrong). Raises ``ResultFileError`` naming file, row (a CSV's line) and column, as the in-memory import does."""
    memory_bytes = budget.limits.streamed_memory_bytes
    source = stream_blocks.blocks_of(path, file_name, budget, _block_bytes(memory_bytes), fmt)
    if isinstance(source, stream_blocks.FixedColumnBlocks):
        detected = source.entry.name
    else:
        detected = None if source is None else _header_format(source.names, column_map)
    fmt = fmt or detected
    if detected is None or fmt not in STREAMED_FORMATS:
        yield None
        return
    entry = BY_NAME[fmt]
    budget.holds(memory_bytes, file_name)
    with tempfile.TemporaryDirectory(prefix="emuplan-streamed-") as directory:
        result = StreamedResult(fmt, {}, {}, Path(directory), memory_bytes, file_name)
        with _out_of_resources_as_domain_errors(result):  # the Parquet written as it is read may fill the disk
            if not (entry.streaming.csv_by_duckdb and _flows_by_duckdb(result, entry, source, column_map, collective)):
                _read_blocks(result, entry, source, file_name, column_map, collective)
        yield result


def _header_format(names: list[str], column_map: dict[str, str] | None) -> str | None:
    try:
        columns = headers.map_columns(names, column_map)
    except ValueError:
        return None
    return next((e.name for e in DETECTION_ORDER if e.kind == "table" and format_module(e).recognises(columns)), None)


def _read_blocks(result, entry: Format, source, file_name, column_map, collective) -> None:
    """Every block checked and appended to the Parquet tables; read again from the start with wider column
    types when a CSV's block does not fit the types the first one showed."""
    while True:
        try:
            _read_blocks_once(result, entry, source, file_name, column_map, collective)
            return
        except pa.ArrowInvalid as error:
            if not source.widened(str(error)):
                raise


def _read_blocks_once(result, entry: Format, source, file_name, column_map, collective) -> None:
    """The blocks as the format's streaming says (``formats.Streaming``): a table format's into samples by its
    ``parse`` or into flows by its ``flows_of``; a text format's (fixed columns, no header) into flows by its
    ``flows_of``, the whole file one iteration."""
    reader = format_module(entry)
    kind = entry.streaming.into
    schema = FLOWS_SCHEMA if kind == "flows" else SAMPLES_SCHEMA
    target = result.directory / f"{kind}.parquet"
    table_reader = _FlowBlocks(result, reader, file_name, column_map, collective) if kind == "flows" else None
    order = {name: {} for name in ("collective", "size_bytes", "variant")}
    headerless = entry.kind == "text"
    mapped = {} if headerless else _mapped(source.names, column_map, file_name)
    if headerless:  # no iteration column, no collective column
        _add_warnings(result, [reader.one_iteration_warning(file_name)])
        if collective:
            table_reader.collectives.setdefault(collective, None)
    first_units: dict[str, str] = {}  # the units the first row states: every block's rows state the same
    rows = 0
    with (
        closing(source.batches()) as batches,
        pq.ParquetWriter(str(target), schema, **parquet_write_options(schema)) as writer,
    ):
        for batch in batches:
            block = pa.Table.from_batches([batch])
            first = rows

            def row_name(index: int, first: int = first) -> str:
                return source.row_name(first + index)

            if block.num_rows == 0:
                continue
            if headerless:
                canonical = table_reader.endpoints_noted(reader.flows_of(block))
            elif table_reader is not None:
                canonical = table_reader.flows(block, row_name)
            else:
                parsed = parse_table(block, file_name, entry, column_map, collective, row_name, first_units)
                canonical = parsed.samples
                if "iteration" not in mapped:  # the row order is the iteration order, across blocks
                    iterations = pc.add(canonical["iteration"], first)
                    canonical = canonical.set_column(0, canonical.schema.field(0), iterations)
                _add_warnings(result, parsed.warnings)
                _note_first_appearances(order, canonical)
            rows += block.num_rows
            writer.write_table(canonical)
            del batch, block, canonical
            # Arrow's allocator keeps what a block freed for a second before handing it back: resident
            # under every later block and DuckDB's sort. Handed back at once.
            pa.default_memory_pool().release_unused()
    if rows == 0:
        raise ResultFileError(f"{file_name}: the header has no data rows under it")
    result.tables[kind] = target
    result.row_counts[kind] = rows
    if table_reader is not None:
        table_reader.finish(target)
        if not entry.streaming.ranks_are_endpoints:
            result.ranks = None  # ns-3's endpoints are simulated nodes: no rank count, as in memory
    else:
        result.key_order = {name: list(values) for name, values in order.items()}


def _block_bytes(memory_bytes: int) -> int:
    return max(MIN_BLOCK_BYTES, min(MAX_BLOCK_BYTES, memory_bytes // 128))


def _mapped(names: list[str], column_map, file_name: str) -> dict:
    try:
        return headers.map_columns(names, column_map)
    except ValueError as error:
        raise ResultFileError(f"{file_name}: {error}") from error


def _add_warnings(result: StreamedResult, warnings: list[str]) -> None:
    """A block's warnings, each once (every block says 'no iteration column')."""
    for warning in warnings:
        if warning not in result.warnings:
            result.warnings.append(warning)


def _note_first_appearances(order: dict[str, dict], samples: pa.Table) -> None:
    """The group key values of a block of samples, in the order they first appear in it, after those seen."""
    for name, seen in order.items():
        column = samples[name].combine_chunks()
        if pa.types.is_dictionary(column.type):
            codes = pc.unique(column.indices).to_pylist()
            values = [column.dictionary[code].as_py() for code in codes]
        else:
            values = pc.unique(column).to_pylist()
        for value in values:
            seen.setdefault(value, None)


class _FlowBlocks:
    """Per-flow blocks: their flows, and what the iterations and the run need of them (collectives, endpoints)."""

    def __init__(self, result: StreamedResult, reader: ModuleType, file_name: str, column_map, collective: str | None):
        self.result, self.file_name, self.column_map, self.collective = result, file_name, column_map, collective
        self.reader = reader  # the format's module: its ``flows_of``
        self.collectives: dict[str, None] = {}
        self.endpoints: set[str] = set()
        self.first_units: dict[str, str] = {}  # every block's cells state the first row's units

    def flows(self, block: pa.Table, row_name) -> pa.Table:
        mapped = tabular.mapped_columns(block, self.file_name, self.column_map)
        reader = tabular.Columns(block, mapped, self.file_name, row_name, self.first_units)
        flows = self.reader.flows_of(reader)
        collectives = reader.collectives(self.collective, self.file_name)
        _add_warnings(self.result, reader.warnings)
        names = [collectives] if isinstance(collectives, str) else pc.unique(collectives.cast(pa.string())).to_pylist()
        for name in names:
            self.collectives.setdefault(name, None)
        return self.endpoints_noted(flows)

    def endpoints_noted(self, flows: pa.Table) -> pa.Table:
        """``flows``, their endpoints noted (the run's ranks)."""
        for column in ("src", "dst"):
            self.endpoints.update(flows[column].combine_chunks().dictionary.to_pylist())
        return flows

    def finish(self, flows_path: Path) -> None:
        """The iterations as samples (``tabular.iterations_from_flows``, by DuckDB) and the rank count."""
        result = self.result
        result.ranks = len(self.endpoints)
        collective = next(iter(self.collectives), "unknown")
        if len(self.collectives) > 1:
            result.warnings.append("flows name several collectives: iterations are labelled with the first one")
        with _duckdb(result) as connection:
            flows = _parquet(flows_path, row_numbers=False)
            has_starts = _one(connection, f"SELECT count(start_us) FROM {flows}")[0] > 0
            if not has_starts:
                result.warnings.append("flows have no start times: each iteration's completion is its longest flow")
            duration = "max(start_us + fct_us) - min(start_us)" if has_starts else "max(fct_us)"
            iterations = connection.sql(
                f"SELECT iteration, {duration} AS duration_us, min(start_us) AS start_us FROM {flows} "
                "GROUP BY iteration ORDER BY iteration"
            )
            target = result.directory / "samples.parquet"
            rows = 0
            with pq.ParquetWriter(str(target), SAMPLES_SCHEMA, **parquet_write_options(SAMPLES_SCHEMA)) as writer:
                for batch in iterations.to_arrow_reader(FETCH_ROWS):
                    writer.write_table(
                        samples_table(
                            duration_us=batch["duration_us"].to_numpy(zero_copy_only=False),
                            iteration=batch["iteration"].to_numpy(),
                            collective=collective,
                            start_us=batch["start_us"] if has_starts else None,
                        )
                    )
                    rows += batch.num_rows
        result.tables["samples"] = target
        result.row_counts["samples"] = rows
        result.key_order = {"collective": [collective], "size_bytes": [None], "variant": [""]}


def _flows_by_duckdb(result: StreamedResult, entry: Format, source, column_map, collective) -> bool:
    """A plain per-flow CSV read into the flows table by DuckDB's own multi-threaded CSV reader, its columns
    typed up front and every check ``formats.per_flow.flows_of`` makes (no empty or non-numeric time, no
    negative or out-of-range time or size, whole iterations and QPs) done in the same query, which stops at the
    first bad cell. False, with nothing kept, when any cell is refused or the file needs what only the block
    reader does (times with units in their cells or in a unit column, sizes in a unit, a gzip): the block
    reader then reads it and names the bad cell by file, line and column exactly as before."""
    mapped = _mapped(source.names, column_map, result.file_name)
    times = ("start", "end", "duration") if "duration" in mapped else ("start", "end")
    if (
        not isinstance(source, stream_blocks.CsvBlocks)
        or source.gzipped
        or "duration" not in mapped
        and ("start" not in mapped or "end" not in mapped)
        or any(mapped[role].scale is None for role in times if role in mapped)
        or ("size" in mapped and mapped["size"].scale not in (None, 1))
    ):
        return False
    types = {name: "VARCHAR" for name in source.names}
    for role, column in mapped.items():
        if role in ("start", "end", "duration", "qp", "size", "iteration"):
            types[column.name] = "DOUBLE"

    def cell(role: str) -> str:
        return '"' + mapped[role].name.replace('"', '""') + '"'

    def time_us(role: str, *, duration: bool) -> str:
        value = f"{cell(role)} * {mapped[role].scale!r}"
        bad = f"{value} IS NULL OR NOT isfinite({value}) OR {value} < 0"
        if duration:
            bad += f" OR {value} > {LONGEST_TIME_US!r} OR ({value} > 0 AND {value} < {SHORTEST_TIME_US!r})"
        return _refused_where(bad, value)

    start = time_us("start", duration=False) if "start" in mapped else "NULL::DOUBLE"
    if "duration" in mapped:
        fct = time_us("duration", duration=True)
    else:
        end = time_us("end", duration=False)
        fct_value = f"({end}) - ({start})"
        fct = _refused_where(
            f"NOT isfinite({fct_value}) OR {fct_value} < 0 OR {fct_value} > {LONGEST_TIME_US!r}"
            f" OR ({fct_value} > 0 AND {fct_value} < {SHORTEST_TIME_US!r})",
            fct_value,
        )

    def whole(role: str, *, empty: bool) -> str:
        # Read as doubles (DuckDB's own integer reader rounds '3.5' to 4): whole and exact in a double, or the
        # block reader reads the file; an empty cell is NULL where allowed.
        value = cell(role)
        bad = f"NOT isfinite({value}) OR {value} <> round({value}) OR abs({value}) >= {2**53}"
        bad = f"{value} IS NULL OR {bad}" if not empty else bad
        if role == "size":
            bad += f" OR {value} < 0"
        return _refused_where(bad, f"{value}::BIGINT")

    iteration = whole("iteration", empty=False) if "iteration" in mapped else "0::BIGINT"
    qp = whole("qp", empty=True) if "qp" in mapped else "NULL::BIGINT"
    size = whole("size", empty=True) if "size" in mapped else "NULL::BIGINT"
    names = f"{cell('collective')} AS collective_name" if "collective" in mapped else "NULL AS collective_name"
    columns = ", ".join(f"'{name.replace(chr(39), chr(39) * 2)}': '{kind}'" for name, kind in types.items())
    query = (
        f"SELECT {iteration} AS iteration, coalesce({cell('src')}, '') AS src, coalesce({cell('dst')}, '') AS dst,"
        f" {qp} AS qp, {size} AS size_bytes, {start} AS start_us, {fct} AS fct_us, {names}"
        f" FROM read_csv('{str(source.path).replace(chr(39), chr(39) * 2)}', header = true, auto_detect = false,"
        f" delim = '{source.delimiter}', quote = '\"', escape = '\"', strict_mode = true, columns = {{{columns}}})"
    )
    target = result.directory / "flows.parquet"
    table_reader = _FlowBlocks(result, format_module(entry), result.file_name, column_map, collective)
    collective_names: dict[str, None] = {}
    rows = 0
    import duckdb

    try:
        with (
            _duckdb(result, ordered=True) as connection,
            pq.ParquetWriter(str(target), FLOWS_SCHEMA, **parquet_write_options(FLOWS_SCHEMA)) as writer,
        ):
            for batch in connection.sql(query).to_arrow_reader(READ_ROWS):
                flows = pa.Table.from_batches([batch]).drop_columns("collective_name")
                for column in ("src", "dst"):
                    encoded = pc.dictionary_encode(flows[column]).cast(TEXT)
                    flows = flows.set_column(flows.schema.get_field_index(column), column, encoded)
                    for chunk in encoded.chunks:
                        table_reader.endpoints.update(chunk.dictionary.to_pylist())
                if "collective" in mapped:
                    for name in pc.unique(batch.column("collective_name").fill_null("")).to_pylist():
                        collective_names.setdefault(name, None)
                rows += batch.num_rows
                writer.write_table(flows.cast(FLOWS_SCHEMA))
    except (duckdb.Error, OSError):
        # A cell DuckDB does not take (a conversion, a row of the wrong width, a check), or a header it cannot
        # read: the block reader names what is wrong. Out of memory or disk was raised as the domain's already.
        return False
    if rows == 0:
        raise ResultFileError(f"{result.file_name}: the header has no data rows under it")
    # The collectives as the block reader names them, from the names in the order they first appear.
    if "iteration" not in mapped:  # warned first, as flows_of does
        result.warnings.append(f"{result.file_name}: no iteration column: all flows count as one iteration")
    distinct = pa.table({mapped["collective"].name: list(collective_names)}) if "collective" in mapped else None
    reader = tabular.Columns(distinct if distinct is not None else pa.table({}), mapped, result.file_name,
                             tabular.csv_line)  # fmt: skip
    folded = reader.collectives(collective, result.file_name)
    table_reader.collectives.update(
        dict.fromkeys([folded] if isinstance(folded, str) else folded.cast(pa.string()).to_pylist())
    )
    _add_warnings(result, reader.warnings)
    result.tables["flows"] = target
    result.row_counts["flows"] = rows
    table_reader.finish(target)
    return True


def _refused_where(bad: str, value: str) -> str:
    """``value``, or DuckDB's Invalid Input Error where ``bad`` holds: the query stops at that cell."""
    return f"CASE WHEN {bad} THEN error('refused') ELSE {value} END"


@contextmanager
def stored_result(
    source_format: str,
    open_table: Callable[[str], AbstractContextManager[BinaryIO]],
    kinds: list[str],
    collectives: dict[str, str],
    *,
    file_name: str,
    ranks: int | None,
    hosts: int | None,
    budget: ImportBudget,
) -> Iterator[StreamedResult]:
    """A stored run's Parquet tables (``open_table(kind)`` for each of ``kinds``; ``samples`` first) copied to a
    temporary directory (deleted on exit) for ``summarise_streamed``, the samples a row group at a time with
    each collective renamed by ``collectives`` (old name → new): a huge run summarised again in the streamed
    import's memory, charged to ``budget``, never whole."""
    memory_bytes = budget.limits.streamed_memory_bytes
    budget.holds(memory_bytes, file_name)
    with tempfile.TemporaryDirectory(prefix="emuplan-streamed-") as directory:
        result = StreamedResult(source_format, {}, {}, Path(directory), memory_bytes, file_name, ranks, hosts)
        for kind in kinds:
            target = result.directory / f"{kind}.parquet"
            with open_table(kind) as stored, _out_of_resources_as_domain_errors(result):
                if kind == "samples":
                    result.row_counts[kind], result.key_order = _samples_renamed(stored, target, collectives)
                else:
                    with target.open("wb") as copy:
                        shutil.copyfileobj(stored, copy, MAX_BLOCK_BYTES)
                    result.row_counts[kind] = pq.ParquetFile(target).metadata.num_rows
            result.tables[kind] = target
        yield result


def _samples_renamed(stored: BinaryIO, target: Path, collectives: dict[str, str]) -> tuple[int, dict[str, list]]:
    """The samples Parquet ``stored`` written to ``target`` with its collectives renamed; its row count and its
    group keys in the order they first appear."""
    # Column chunks read as they are decoded, not a row group's all at once first.
    source = pq.ParquetFile(stored, pre_buffer=False)
    schema = source.schema_arrow
    order = {name: {} for name in ("collective", "size_bytes", "variant")}
    column = schema.get_field_index("collective")
    with pq.ParquetWriter(str(target), schema, **parquet_write_options(schema)) as writer:
        for batch in source.iter_batches(FETCH_ROWS):
            samples = pa.Table.from_batches([batch])
            if collectives:
                renamed = renamed_text(samples["collective"].combine_chunks(), lambda name: collectives.get(name, name))
                samples = samples.set_column(column, schema.field(column), renamed.cast(schema.field(column).type))
            _note_first_appearances(order, samples)
            writer.write_table(samples)
            del samples
            pa.default_memory_pool().release_unused()  # as the CSV reader does: not resident under DuckDB's sort
    return source.metadata.num_rows, {name: list(values) for name, values in order.items()}


def _parquet(path: Path, *, row_numbers: bool = True) -> str:
    """A table for DuckDB to read; ``row_numbers``: with each row's place in the file (``file_row_number``, what
    ties in file order are broken by), which the flows' group-bys and sort do not need."""
    return f"read_parquet('{path}', file_row_number = {str(row_numbers).lower()})"


@contextmanager
def _duckdb(result: StreamedResult, *, ordered: bool = False):
    """A DuckDB connection in the import's memory, spilling under its directory; DuckDB running out of either
    raised as the domain's errors: out of memory ``ResultFileTooLarge`` (413), the spill's disk full
    ``ImportDiskFull`` (507). DuckDB says a full disk as out of memory ("failed to offload … the
    'max_temp_directory_size' setting", which defaults to the disk's free space) or as an IO error."""
    import duckdb

    spill = result.directory / "duckdb-spill"
    connection = duckdb.connect(
        config={
            "memory_limit": f"{int(result.memory_bytes * DUCKDB_SHARE) >> 20}MB",
            "temp_directory": str(spill),
            "threads": max(1, min(4, os.cpu_count() or 1)),
            "preserve_insertion_order": ordered,
        }
    )
    connection.sql("SET enable_progress_bar = false")  # it draws on the server's terminal otherwise
    try:
        with _out_of_resources_as_domain_errors(result):
            yield connection
    finally:
        connection.close()


@contextmanager
def _out_of_resources_as_domain_errors(result: StreamedResult):
    """DuckDB's errors (and a file write's) when the import ran out of memory or of disk raised as the domain's;
    any other error as it is. A query's error while its Arrow batches are read comes through Arrow's reader as
    an OSError with DuckDB's text."""
    import duckdb

    try:
        yield
    except (duckdb.OutOfMemoryException, duckdb.IOException, OSError) as error:
        domain_error = _out_of_resources(result, str(error))
        if domain_error is None:
            raise
        raise domain_error from error


def _out_of_resources(result: StreamedResult, message: str) -> ValueError | None:
    if "max_temp_directory_size" in message or message.startswith("IO Error") or "No space left on device" in message:
        return ImportDiskFull(
            f"{result.file_name}: the server's temporary directory (TMPDIR) ran out of space for the import's "
            "tables and sort: free space there, or set TMPDIR to a larger disk, and try again"
        )
    if message.startswith("Out of Memory Error"):
        return ResultFileTooLarge(
            f"{result.file_name}: summarising it takes more than the {result.memory_bytes} bytes of memory a "
            f"streamed import may hold (EMUPLAN_STREAMED_IMPORT_MEMORY_BYTES; the default is "
            f"{DEFAULT_STREAMED_MEMORY_BYTES}): raise it on the server and try again"
        )
    return None


KEY = "collective, size_bytes, variant"


def _one(connection, query: str) -> tuple:
    """The one row ``query`` answers."""
    (row,) = connection.sql(query).fetchall()
    return row


def summarise_streamed(result: StreamedResult, network: NetworkModel | None = None) -> dict:
    """The run's summary as ``stats.summarise`` gives it for the same file (groups, ECDF grids and delay series,
    overall figures, the flows' completion figures and the stragglers of a per-flow file), from the Parquet
    tables on disk in bounded memory."""
    samples = _parquet(result.tables["samples"])
    with _duckdb(result) as connection:
        keys = connection.sql(
            f"SELECT {KEY}, count(*), avg(duration_us), {', '.join(f'avg({name})' for name in REPORTED_FIGURES)}, "
            "min(iteration), max(iteration), arg_min(duration_us, (iteration, file_row_number)) "
            f"FROM {samples} GROUP BY ALL ORDER BY {KEY}"
        ).fetchall()
        points = curve_points(len(keys))
        counts = [row[3] for row in keys]
        described = _order_statistics(
            connection, f"SELECT duration_us FROM {samples} ORDER BY {KEY}, duration_us", counts,
            [row[4] for row in keys], points, kept=SLOWEST_KEPT,
        )  # fmt: skip
        slowest = _slowest(connection, samples, keys, described)
        delays = _delays(connection, samples, keys, points, [stats["p99_9_us"] for stats, _, _ in described])
        groups, ecdfs, delay_list = [], [], []
        for index, row in enumerate(keys):
            key, count = tuple(row[:3]), row[3]
            stats = group_entry(key, described[index][0])
            stats.update(reported_figures(list(row[5:8])))
            stats.update(group_rates(stats, network, result.ranks))
            if count > 1:
                stats["slowest"] = slowest[index]
                stats["first"] = {"iteration": int(row[8]), "duration_us": float(row[10])}
            groups.append(stats)
            ecdfs.append(described[index][1])
            delay_list.append(delays[index])
        position = _first_appearance_position(result.key_order, [tuple(row[:3]) for row in keys])
        order = sorted(range(len(keys)), key=position.__getitem__)
        total = sum(counts)
        if len(keys) > 1:
            mean = _one(connection, f"SELECT avg(duration_us) FROM {samples}")[0]
            ((overall, overall_ecdf, _),) = _order_statistics(
                connection, f"SELECT duration_us FROM {samples} ORDER BY duration_us", [total], [mean], CURVE_POINTS
            )
        else:  # all samples are the one group, whose grid has CURVE_POINTS too
            overall, overall_ecdf, _ = described[0]
        summary = {
            "sample_count": total,
            "overall": overall,
            "overall_ecdf": overall_ecdf,
            "groups": [groups[i] for i in order],
            "ecdf": [ecdfs[i] for i in order],
            "delay": [delay_list[i] for i in order],
            "reported_avg_busbw_gbps": {},
        }
        if "flows" in result.tables:
            flows = _parquet(result.tables["flows"], row_numbers=False)
            count, mean = _one(connection, f"SELECT count(*), avg(fct_us) FROM {flows}")
            ((fct, fct_ecdf, _),) = _order_statistics(
                connection, f"SELECT fct_us FROM {flows} ORDER BY fct_us", [count], [mean], CURVE_POINTS
            )
            summary["flows"] = {"label": "flow completion", **fct, "ecdf": fct_ecdf}
            stragglers = _flow_stragglers(connection, result.tables["flows"], samples)
            if stragglers is not None:
                summary["stragglers"] = stragglers
    return summary


def _first_appearance_position(key_order: dict[str, list], keys: list[tuple]) -> dict[int, tuple]:
    """Each group's place in the in-memory order: by its collective's first appearance, then its size's, then
    its variant's."""
    ranks = [
        {value: rank for rank, value in enumerate(key_order[name])} for name in ("collective", "size_bytes", "variant")
    ]
    return {index: tuple(rank[value] for rank, value in zip(ranks, key, strict=True)) for index, key in enumerate(keys)}


def _order_statistics(connection, sorted_query: str, counts: list[int], means: list[float], points: int, kept: int = 0):
    """Per group of ``sorted_query``'s values (groups one after another, ``counts`` each, ascending within
    each): (``describe``'s figures, ``ecdf_grid``, the picked values by rank) from one pass past the sorted
    values, picking the ranks both read; ``kept`` > 0 also picks each group's ``kept``-th largest value."""
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    wanted_per_group = []
    for start, count in zip(starts[:-1], counts, strict=True):
        ranks = set(described_ranks(count)) | set(ecdf_ranks(count, points).tolist())
        if kept:
            ranks.add(count - min(kept, count))
        wanted_per_group.append(np.array(sorted(ranks), dtype=np.int64) + start)
    wanted = np.concatenate(wanted_per_group)
    picked = np.empty(len(wanted))
    squares = np.zeros(len(counts))
    means_array = np.asarray(means, dtype=np.float64)
    at = 0
    for batch in connection.sql(sorted_query).to_arrow_reader(FETCH_ROWS):
        values = batch.column(0).to_numpy(zero_copy_only=False)
        end = at + len(values)
        low, high = np.searchsorted(wanted, [at, end])
        picked[low:high] = values[wanted[low:high] - at]
        # Squared deviations from each group's mean, summed per group over the batch's stretch of it.
        first_group = np.searchsorted(starts, at, side="right") - 1
        last_group = np.searchsorted(starts, end - 1, side="right") - 1
        for group in range(first_group, last_group + 1):
            lo, hi = max(starts[group], at) - at, min(starts[group + 1], end) - at
            squares[group] += float(np.sum(np.square(values[lo:hi] - means_array[group])))
        at = end
    results = []
    offset = 0
    for group, (start, count) in enumerate(zip(starts[:-1], counts, strict=True)):
        ranks = wanted_per_group[group] - start
        value_at = dict(zip(ranks.tolist(), picked[offset : offset + len(ranks)].tolist(), strict=True)).__getitem__
        offset += len(ranks)
        std = float(np.sqrt(squares[group] / (count - 1))) if count > 1 else 0.0
        grid = ecdf_ranks(count, points)
        ecdf = ecdf_of(np.array([value_at(rank) for rank in grid.tolist()]), grid, count)
        results.append((describe_ranks(count, value_at, float(means[group]), std), ecdf, value_at))
    return results


def _slowest(connection, samples: str, keys: list, described: list) -> list[list[dict]]:
    """Each group's ``SLOWEST_KEPT`` slowest trials, slowest first, ties the earlier in iteration (then file)
    order first, as ``stats._slowest_and_first`` lists them: only rows at or above the group's kept-th largest
    time are sorted."""
    counts = [row[3] for row in keys]
    bounds = pa.table(
        {
            "b_collective": [row[0] for row in keys],
            "b_size": pa.array([row[1] for row in keys], pa.int64()),
            "b_variant": [row[2] for row in keys],
            "b_threshold": [
                value_at(count - min(SLOWEST_KEPT, count))
                for (_, _, value_at), count in zip(described, counts, strict=True)
            ],
        }
    )
    connection.register("bounds", bounds)
    rows = connection.sql(
        f"SELECT {KEY}, iteration, duration_us FROM ("
        f"  SELECT {KEY}, iteration, duration_us, row_number() OVER ("
        f"    PARTITION BY {KEY} ORDER BY duration_us DESC, iteration, file_row_number) AS place"
        f"  FROM {samples} JOIN bounds ON collective = b_collective AND size_bytes IS NOT DISTINCT FROM b_size"
        f"   AND variant = b_variant WHERE duration_us >= b_threshold)"
        f" WHERE place <= {SLOWEST_KEPT} ORDER BY {KEY}, place"
    ).fetchall()
    connection.unregister("bounds")
    by_key: dict[tuple, list[dict]] = {}
    for row in rows:
        by_key.setdefault(tuple(row[:3]), []).append({"iteration": int(row[3]), "duration_us": float(row[4])})
    return [by_key.get(tuple(row[:3]), []) for row in keys]


def _delays(connection, samples: str, keys: list, points: int, spike_floors: list[float]) -> list[dict]:
    """Each group's delay series (module docstring), from its samples in iteration (then file) order; the trials
    above the group's p99.9 (``spike_floors``) kept as ``stats.delay_series`` keeps them."""
    delays = []
    for row, spike_floor in zip(keys, spike_floors, strict=True):
        key, count, first_iteration, last_iteration = tuple(row[:3]), row[3], row[8], row[9]
        where = "collective = $1 AND size_bytes IS NOT DISTINCT FROM $2 AND variant = $3"
        if count <= DELAY_ROWS_IN_MEMORY:
            series = connection.sql(
                f"SELECT iteration, duration_us FROM {samples} WHERE {where} ORDER BY iteration, file_row_number",
                params=list(key),
            ).to_arrow_table()
        else:
            # Per iteration bucket its smallest and largest time (the earliest of equals), the first and last
            # sample, and the slowest trials above p99.9 that the series keeps at their own iteration.
            buckets = points * DELAY_BUCKETS_PER_POINT
            width = (last_iteration - first_iteration + 1) / buckets
            series = connection.sql(
                f"WITH picked AS ("
                f" SELECT arg_min(file_row_number, (duration_us, iteration, file_row_number)) AS picked_row"
                f" FROM {samples} WHERE {where} GROUP BY floor((iteration - {first_iteration}) / {width})"
                f" UNION SELECT arg_max(file_row_number, (duration_us, -iteration, -file_row_number))"
                f" FROM {samples} WHERE {where} GROUP BY floor((iteration - {first_iteration}) / {width})"
                f" UNION SELECT arg_min(file_row_number, (iteration, file_row_number)) FROM {samples} WHERE {where}"
                f" UNION SELECT arg_max(file_row_number, (iteration, file_row_number)) FROM {samples} WHERE {where}"
                f" UNION (SELECT file_row_number FROM {samples} WHERE {where} AND duration_us > $4"
                f" ORDER BY duration_us DESC LIMIT {points // SPIKE_SHARE}))"
                f" SELECT iteration, duration_us FROM {samples} WHERE {where}"
                f" AND file_row_number IN (SELECT picked_row FROM picked) ORDER BY iteration, file_row_number",
                params=[*key, spike_floor],
            ).to_arrow_table()
        delays.append(
            delay_series(
                series["iteration"].to_numpy(),
                series["duration_us"].to_numpy(zero_copy_only=False),
                points,
                spike_floor=spike_floor,
            )
        )
    return delays


def _iteration_ranges(flows_path: Path, rows_per_range: int) -> list[tuple[int, int]]:
    """Consecutive ranges of the flows' iterations, together all of them, about ``rows_per_range`` flows each,
    cut where a row group starts, when the row groups come in iteration order (each starts at or after the end of
    the one before, as a file written iteration by iteration does): a range's query then reads only its row
    groups (DuckDB skips the others by their iteration statistics) and groups and sorts its cells in memory. One
    range of every iteration otherwise, or when the file has no statistics (stored before they were written).
    100 M flows (25 M cells): 11.0 CPU-s in 25 ranges against 12.6 in one, whose group-by and sort spilled."""
    metadata = pq.ParquetFile(flows_path).metadata
    column = metadata.schema.names.index("iteration")
    bounds = []
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        statistics = group.column(column).statistics
        if statistics is None or not statistics.has_min_max:
            return [EVERY_ITERATION]
        bounds.append((statistics.min, statistics.max, group.num_rows))
    if not bounds or any(later[0] < earlier[1] for earlier, later in itertools.pairwise(bounds)):
        return [EVERY_ITERATION]
    ranges, first, rows = [], bounds[0][0], 0
    for (_, _, count), following in zip(bounds, [*bounds[1:], None], strict=True):
        rows += count
        if following is not None and rows >= rows_per_range and following[0] > first:
            ranges.append((first, following[0] - 1))
            first, rows = following[0], 0
    ranges.append((first, bounds[-1][1]))
    return ranges


def _flow_stragglers(connection, flows_path: Path, samples: str) -> dict | None:
    """``stragglers.summarise_stragglers`` of ``stragglers.rank_times_from_flows``: per (iteration, receiving
    endpoint) its last byte after the iteration's first start, summed per endpoint a block of iterations at a
    time, the cells grouped a range of iterations at a time (``_iteration_ranges``)."""
    flows = _parquet(flows_path, row_numbers=False)
    names = [row[0] for row in connection.sql(f"SELECT DISTINCT dst FROM {flows}").fetchall()]
    if len(names) < 2:
        return None
    names.sort(key=natural_key)
    # Each rank by its column number: grouped by two integers DuckDB spills; by an integer and text it ran out of
    # memory on 100 M flows.
    connection.register("endpoints", pa.table({"name": names, "position": np.arange(len(names))}))
    has_starts = _one(connection, f"SELECT count(start_us) FROM {flows}")[0] > 0
    # The last byte per cell first, then less its iteration's first start (the samples' start: the same min):
    # subtracting one number is monotone, so max(end − first) = max(end) − first, to the last bit; joined after the
    # group-by, the join meets one row per cell, not per flow.
    last = "max(start_us + fct_us)" if has_starts else "max(fct_us)"
    grouped = (
        f"SELECT iteration, position, {last} AS last_end FROM {flows} JOIN endpoints ON dst = name"
        " WHERE iteration BETWEEN $1 AND $2 GROUP BY iteration, position"
    )
    if has_starts:
        cells = (
            f"WITH cells AS ({grouped}) SELECT c.iteration, c.position, c.last_end - s.start_us AS finish_us"
            f" FROM cells c JOIN {samples} s USING (iteration) ORDER BY c.iteration"
        )
    else:
        cells = f"SELECT iteration, position, last_end AS finish_us FROM ({grouped}) ORDER BY iteration"
    sums = None
    calls = 0
    pending: list[pa.RecordBatch] = []

    def add(block: pa.Table) -> None:
        nonlocal sums, calls
        iterations = block["iteration"].to_numpy()
        call, rows = np.unique(iterations, return_inverse=True)
        times = np.full((len(call), len(names)), np.nan)
        column = block["position"].to_numpy(zero_copy_only=False)
        np.fmax.at(times, (rows, column), block["finish_us"].to_numpy(zero_copy_only=False))
        block_sums = column_sums(times)
        sums = block_sums if sums is None else add_column_sums(sums, block_sums)
        calls += len(call)

    # The ranges follow one another, each in iteration order: their cells come in iteration order throughout.
    ranged = (
        batch
        for low, high in _iteration_ranges(flows_path, ITERATION_RANGE_ROWS)
        for batch in connection.sql(cells, params=[low, high]).to_arrow_reader(FETCH_ROWS)
    )
    for batch in ranged:
        pending.append(batch)
        table = pa.Table.from_batches(pending)
        iterations = table["iteration"]
        last = iterations[-1]
        complete = pc.less(iterations, last)
        done = table.filter(complete)
        if done.num_rows:
            add(done)
        pending = table.filter(pc.invert(complete)).to_batches()
    if pending:
        add(pa.Table.from_batches(pending))
    ranks, slowest = column_entries(sums, names, [{"host": ""} for _ in names])
    return {
        "unit": "endpoint",
        "basis": FLOW_BASIS,
        "calls": calls,
        "ranks": ranks,
        "slowest_rank": rank_headline(ranks, slowest),
        "hosts": [],
        "slowest_host": None,
    }
