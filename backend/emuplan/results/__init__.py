"""Result files → one canonical samples table → statistics, ECDF grids and delay series.

Entry points: ``parse_result_file`` (any supported format) and ``summarise`` (the cached run summary);
``compare_runs`` for side-by-side statistics with Kolmogorov–Smirnov tests; ``export`` the samples as a
spreadsheet-safe CSV. May import ``emuplan.workload`` (collective names, the plan contract); never
FastAPI or the database.
"""

from emuplan.results.canonical import FORMATS, ParsedResult, ResultFileError, ResultFileTooLarge
from emuplan.results.compare import RunSummary, compare_runs
from emuplan.results.parse import parse_result_file
from emuplan.results.stats import NetworkModel, summarise

__all__ = [
    "FORMATS",
    "NetworkModel",
    "ParsedResult",
    "ResultFileError",
    "ResultFileTooLarge",
    "RunSummary",
    "compare_runs",
    "parse_result_file",
    "summarise",
]
