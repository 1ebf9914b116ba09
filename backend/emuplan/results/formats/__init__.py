"""The result formats emuplan reads: one entry each, in the order detection tries them.

Each entry names the module beside this one that recognises the format and parses it into the canonical
tables (``results.canonical``: ``ParsedResult``). A module reads one format and imports no other format's
module: what two formats share lives in a neutral module (``results.formats.tabular``: reading and checking a
table's columns, flows into iterations; ``results.formats.nccl_tests_shared``: which collective nccl-tests output holds;
``results.formats.observed``: a training job's files into one run). ``results.parse`` walks this list.

Two kinds of format, by what recognition looks at:

- ``text``: the start of the content (``upload.Upload.text_head``, at most its first 64 KiB decoded).
  The module defines ``recognises(upload: Upload) -> bool`` and ``parse(upload: Upload) -> ParsedResult``;
  it charges what it builds from the text to ``upload.budget``.
- ``table``: a table with a header row, read from CSV, Feather/Arrow IPC or Parquet by ``results.parse``,
  by the roles its columns play (``headers.map_columns``). The module defines
  ``recognises(columns: dict[str, MappedColumn]) -> bool`` and
  ``parse(reader: tabular.Columns, collective: str | None, column_map: dict | None) -> ParsedResult``.

Files too large to hold whole (a per-iteration or per-flow CSV, gzip CSV, Feather or Parquet file, an ns-3
fct.txt past ``EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES``) are read a block at a time by ``results.streaming.streamed``, each
block through the same parse (``parse.parse_table``; ``per_flow.flow_records`` for flows; ``ns3_fct.flows_of``),
so their checks and errors are the ones here.

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
class Format:
    name: str
    kind: Literal["text", "table"]
    module: str  # of this package: its recognises() and parse()


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
    Format(NS3_FCT, "text", "ns3_fct"),
    Format(PER_FLOW, "table", "per_flow"),
    Format(KAI_SUMMARY, "table", "kai_summary"),
    Format(PER_ITERATION, "table", "per_iteration"),
)
# As listed to people (README, the upload form, --format, the API's format=): the reverse, so that the
# everyday tables come first, the most general of them first.
FORMATS = tuple(entry.name for entry in reversed(DETECTION_ORDER))
BY_NAME = {entry.name: entry for entry in DETECTION_ORDER}


def format_module(entry: Format) -> ModuleType:
    """The module that recognises and parses ``entry``'s format (imported on first use)."""
    return importlib.import_module(f"{__name__}.{entry.module}")
