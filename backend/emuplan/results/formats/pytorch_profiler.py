"""PyTorch profiler Chrome traces, one per rank. Each trace's collectives are read by
``results.torch_profiler``; ``results.observed`` makes one run of a job's files."""

from emuplan.results import observed, torch_profiler
from emuplan.results.canonical import ParsedResult
from emuplan.results.formats import TORCH_PROFILER
from emuplan.results.upload import Upload


def recognises(upload: Upload) -> bool:
    return torch_profiler.looks_like(upload.head)


def parse(upload: Upload) -> ParsedResult:
    return observed.parse_observed([(upload.file_name, upload.content())], TORCH_PROFILER, budget=upload.budget)
