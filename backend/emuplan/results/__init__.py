"""Result files → one canonical samples table → statistics, ECDF grids and delay series.

Entry points: ``parse_result_file`` (any supported format: ``formats`` lists them) and ``summarise`` (the
cached run summary); ``compare_runs`` for side-by-side statistics with Kolmogorov–Smirnov tests; ``export``
the samples as a spreadsheet-safe CSV. May import ``emuplan.workload`` (collective names, the plan contract);
never FastAPI or the database.

Rooms, each importing only those above it (``tests/unit/test_module_imports.py``):

- ``canonical``: the one table every format is read into, and the errors; imports nothing from here;
- ``run_fields``: what a user states of a run (name, tags, facts…), the forms', options' and models' one
  definition; imports nothing from here;
- ``budget``: what an import may hold in memory;
- ``containers/``: gzip, Arrow IPC/Feather and Parquet read under the budget;
- ``formats/``: the registry (``formats/__init__``: names, detection order, which stream) and one module per
  format (what recognises it, how it is read), with what formats share beside them;
- ``parse``: a file → its container → the format that recognises it; ``analysis/``: a run's statistics,
  stragglers, verdict, expected times, comparisons, trends and step costs; ``export``: samples as CSV;
- ``streaming/``: the huge-file path (a block at a time, summarised out of core), asking each format's entry.

The names below are imported on first use: ``emuplan.results.formats`` (the format names, standard library
only) is imported by every ``emuplan`` command, and must not bring pyarrow with this package.
"""

import importlib

_HOMES = {
    "FORMATS": "emuplan.results.formats",
    "ParsedResult": "emuplan.results.canonical",
    "ResultFileError": "emuplan.results.canonical",
    "ResultFileTooLarge": "emuplan.results.canonical",
    "RunSummary": "emuplan.results.analysis.compare",
    "compare_runs": "emuplan.results.analysis.compare",
    "parse_result_file": "emuplan.results.parse",
    "NetworkModel": "emuplan.results.analysis.stats",
    "summarise": "emuplan.results.analysis.stats",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
