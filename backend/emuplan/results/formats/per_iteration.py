"""Per-iteration tables: one row per collective execution (iteration/trial/step, data size, collective,
completion time, optional start time and label), as CSV, Feather or Parquet — a run's own ``samples.parquet``
among them."""

from emuplan.results.canonical import ParsedResult
from emuplan.results.formats import PER_ITERATION
from emuplan.results.formats.headers import MappedColumn
from emuplan.results.formats.tabular import Columns, samples_from_columns


def recognises(columns: dict[str, MappedColumn]) -> bool:
    return "duration" in columns


def parse(reader: Columns, collective: str | None, column_map: dict[str, str] | None) -> ParsedResult:
    return samples_from_columns(reader, PER_ITERATION, collective, column_map)
