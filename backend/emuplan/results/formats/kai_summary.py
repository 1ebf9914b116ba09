"""KAI/KCCB summary tables: ``Data Size``, ``Collective``, ``Completion Time (ms)``, ``Algbw (GB/s)``,
``Busbw (GB/s)``, ``Ideal (%)`` — one row per data size, kept with the bandwidths KAI reported."""

from emuplan.results.canonical import ParsedResult
from emuplan.results.formats import KAI_SUMMARY
from emuplan.results.formats.headers import MappedColumn
from emuplan.results.formats.tabular import Columns, samples_from_columns


def recognises(columns: dict[str, MappedColumn]) -> bool:
    return "duration" in columns and bool({"algbw", "busbw", "ideal"} & columns.keys()) and "iteration" not in columns


def parse(reader: Columns, collective: str | None, column_map: dict[str, str] | None) -> ParsedResult:
    return samples_from_columns(reader, KAI_SUMMARY, collective, column_map)
