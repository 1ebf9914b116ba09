"""NCCL Inspector dumps: one JSON object per collective per communicator per rank, one file per process. Each
file's records are read by ``results.nccl_inspector``; ``results.observed`` makes one run of a job's files."""

from emuplan.results import nccl_inspector, observed
from emuplan.results.canonical import ParsedResult
from emuplan.results.formats import NCCL_INSPECTOR
from emuplan.results.upload import Upload


def recognises(upload: Upload) -> bool:
    return nccl_inspector.looks_like(upload.head)


def parse(upload: Upload) -> ParsedResult:
    return observed.parse_observed([(upload.file_name, upload.content())], NCCL_INSPECTOR, budget=upload.budget)
