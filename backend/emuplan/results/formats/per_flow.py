"""Per-flow (per-chunk) tables: src, dst, qp, bytes, start, end or fct, iteration. The flows are kept as they
are and each iteration's completion is rebuilt as max(end) − min(start)."""

import pyarrow as pa
import pyarrow.compute as pc

from emuplan.results.canonical import ParsedResult, ResultFileError, flows_table
from emuplan.results.formats import PER_FLOW
from emuplan.results.formats.headers import MappedColumn
from emuplan.results.formats.tabular import Columns, iterations_from_flows


def recognises(columns: dict[str, MappedColumn]) -> bool:
    return "src" in columns and "dst" in columns and ("end" in columns or "duration" in columns)


def parse(reader: Columns, collective: str | None, column_map: dict[str, str] | None) -> ParsedResult:
    flows = flows_of(reader)
    endpoints = pc.unique(pa.concat_arrays([flows["src"].combine_chunks().cast(pa.string()),
                                            flows["dst"].combine_chunks().cast(pa.string())]))  # fmt: skip
    return ParsedResult(
        samples=iterations_from_flows(flows, reader.collectives(collective, reader.file_name), reader.warnings),
        source_format=PER_FLOW,
        ranks=len(endpoints),
        warnings=reader.warnings,
        flows=flows,
    )


def flows_of(reader: Columns) -> pa.Table:
    """The table's flows as they are (``FLOWS_SCHEMA``), before the iterations are rebuilt from them (a huge
    file's blocks are read with it one at a time: ``results.streaming.streamed``)."""
    has_start = reader.has("start")
    if reader.has("duration"):
        fct_us = reader.durations_us("duration")
        start_us = reader.durations_us("start") if has_start else None
    elif has_start:
        start_us = reader.durations_us("start")
        end_us = reader.durations_us("end")
        fct_us = end_us - start_us
        reader.check_times("end", fct_us, fct_us)
    else:
        raise ResultFileError(f"{reader.file_name}: per-flow records need an fct column, or start and end columns")
    iteration = reader.iterations()
    if iteration is None:
        reader.warnings.append(f"{reader.file_name}: no iteration column: all flows count as one iteration")
    return flows_table(
        fct_us=fct_us,
        iteration=iteration,
        src=reader.text("src"),
        dst=reader.text("dst"),
        qp=reader.queue_pairs(),
        size_bytes=reader.sizes(),
        start_us=start_us,
    )
