"""The result formats emuplan reads: one entry each, in the order detection tries them.

Each entry names the module beside this one that recognises the format and parses it into the canonical
tables (``results.canonical``: ``ParsedResult``), and says whether a huge file of it streams (``Streaming``).
A module reads one format and imports no other format's module: what two formats share lives in a neutral
module beside them (``tabular`` and ``headers``: reading and checking a table's columns, flows into iterations;
``nccl_tests_shared``: which collective nccl-tests output holds; ``observed``: a training job's files into one
run, ``rank_calls`` what each of its files gives; ``upload``: a file as the text formats see it).
``results.parse`` walks this list; so do ``results.streaming`` and ``observed``: nothing outside this package
names a format's module. Adding a format: its module here, and its entry in ``DETECTION_ORDER``.

Two kinds of format, by what recognition looks at:

- ``text``: the start of the content (``upload.Upload.text_head``, at most its first 64 KiB decoded).
  The module defines ``recognises(upload: Upload) -> bool`` and ``parse(upload: Upload) -> ParsedResult``;
  it charges what it builds from the text to ``upload.budget``.
- ``table``: a table with a header row, read from CSV, Feather/Arrow IPC or Parquet by ``results.parse``,
  by the roles its columns play (``headers.map_columns``). The module defines
  ``recognises(columns: dict[str, MappedColumn]) -> bool`` and
  ``parse(reader: tabular.Columns, collective: str | None, column_map: dict | None) -> ParsedResult``.

Files too large to hold whole (past ``EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES``) of a format whose entry has a
``Streaming`` are read a block at a time by ``results.streaming``, each block through the format's own code, so
their checks and errors are the ones here:

- a table format whose blocks become samples: its ``parse`` (through ``parse.parse_table``), block by block;
- one whose blocks become flows: ``flows_of(reader: tabular.Columns) -> pa.Table`` (``FLOWS_SCHEMA``);
- a text format (no header: fixed columns) whose blocks become flows: ``recognises_text(head: str)``,
  ``COLUMN_NAMES``, ``csv_options(block_bytes)`` (``pyarrow.csv``'s), ``flows_of(block: pa.Table)``,
  ``refusal(lines, file_name, error)`` (the bad line, once Arrow refused a block) and
  ``one_iteration_warning(file_name)``.

Standard library only: every ``emuplan`` command imports this module (``emuplan import --help`` lists the
formats); the format modules, with pyarrow, are imported when a file is read (``format_module``).
"""

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

# Names of the formats, as detected, accepted as an explicit override and stored in run.source_format.
PER_ITERATION = "per-iteration"
KAI_SUMMARY = "kai-summary"
PER_FLOW = "per-flow"
NS3_FCT = "ns3-fct"
NCCL_TESTS = "nccl-tests"
NCCL_TESTS_JSON = "nccl-tests-json"
NCCL_INSPECTOR = "nccl-inspector"
TORCH_PROFILER = "pytorch-profiler"


@dataclass(frozen=True)
class Streaming:
    """How a huge file of a format is read a block at a time (``results.streaming``)."""

    into: Literal["samples", "flows"]  # the table its blocks become; flows make the samples (iterations) after
    # Flows: whether the run's rank count is its flows' endpoints (not ns-3's: they are simulated nodes).
    ranks_are_endpoints: bool = True
    # A plain CSV of it may first be read by DuckDB's CSV reader, checked as ``flows_of`` checks (the per-flow
    # tables: ``streaming.streamed._flows_by_duckdb``).
    csv_by_duckdb: bool = False


@dataclass(frozen=True)
class Format:
    name: str
    kind: Literal["text", "table"]
    module: str  # of this package: its recognises() and parse()
    streaming: Streaming | None = None  # None: a file of it is always read whole


# Detection tries them in this order and takes the first that recognises the file. Text formats come before
# table formats: a table is only read once no text format claims the content. Among them, the stricter test
# goes first: a profiler trace and an Inspector dump are JSON objects with their own keys, which any JSON
# object would otherwise pass as an nccl-tests report; an nccl-tests log has a '# size count …' header row
# anywhere in its head, ns-3's fct.txt only its first line's shape. Among tables, per-flow (src and dst
# columns) and KAI's summary (bandwidth columns, no iteration) have a completion-time column too, so they go
# before per-iteration, which is any table with one.
DETECTION_ORDER = (
    Format(TORCH_PROFILER, "text", "pytorch_profiler"),
    Format(NCCL_INSPECTOR, "text", "nccl_inspector"),
    Format(NCCL_TESTS_JSON, "text", "nccl_tests_json"),
    Format(NCCL_TESTS, "text", "nccl_tests"),
    Format(NS3_FCT, "text", "ns3_fct", Streaming("flows", ranks_are_endpoints=False)),
    Format(PER_FLOW, "table", "per_flow", Streaming("flows", csv_by_duckdb=True)),
    Format(KAI_SUMMARY, "table", "kai_summary"),
    Format(PER_ITERATION, "table", "per_iteration", Streaming("samples")),
)
# As listed to people (docs/formats.md, the upload form, --format, the API's format=): the reverse, so that the
# everyday tables come first, the most general of them first.
FORMATS = tuple(entry.name for entry in reversed(DETECTION_ORDER))
BY_NAME = {entry.name: entry for entry in DETECTION_ORDER}
# The formats a huge file may be of: read a block at a time, and summarised again so (``results.streaming``).
STREAMED_FORMATS = tuple(entry.name for entry in DETECTION_ORDER if entry.streaming is not None)


def format_module(entry: Format) -> ModuleType:
    """The module that recognises and parses ``entry``'s format (imported on first use)."""
    return importlib.import_module(f"{__name__}.{entry.module}")
