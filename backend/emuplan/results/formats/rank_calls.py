"""What each observed-in-training format (``nccl_inspector``, ``pytorch_profiler``) reads from one file, for
``observed`` to join the files of one job: a list of ``RankCall`` (a trace's few hundred calls), or the same as
a table in ``RANK_CALLS_SCHEMA`` (an Inspector dump's million records, where one Python object each would cost
more than reading them)."""

from dataclasses import dataclass

import pyarrow as pa

from emuplan.results.canonical import TEXT, ResultFileError


@dataclass(frozen=True, slots=True)
class RankCall:
    """One rank's record of one collective call. ``call_key`` is the same on every rank of the communicator
    for the same call (Inspector's ``coll_sn``; the n-th call of that op and size in a trace)."""

    communicator: str
    group_size: int | None
    collective: str
    size_bytes: int
    call_key: tuple
    rank: str
    host: str
    duration_us: float
    start_us: float | None
    step: int | None
    where: str
    reported_algbw_gbps: float | None = None
    reported_busbw_gbps: float | None = None
    dtype: str = ""
    elements: int | None = None


# ``RankCall`` as columns (text dictionary-encoded: a few names over millions of records); ``call`` is the call
# key as one integer, ``line`` where the record is in its file,
# ``process`` the process that wrote it where ranks are named by process (NCCL Inspector), else null.
RANK_CALLS_SCHEMA = pa.schema(
    [
        pa.field("communicator", TEXT),
        pa.field("group_size", pa.int64()),
        pa.field("collective", TEXT),
        pa.field("size_bytes", pa.int64()),
        pa.field("call", pa.int64()),
        pa.field("rank", TEXT),
        pa.field("host", TEXT),
        pa.field("process", TEXT),
        pa.field("duration_us", pa.float64()),
        pa.field("start_us", pa.float64()),
        pa.field("step", pa.int64()),
        pa.field("line", pa.int64()),
        pa.field("reported_algbw_gbps", pa.float64()),
        pa.field("reported_busbw_gbps", pa.float64()),
        pa.field("elements", pa.int64()),
        pa.field("dtype", pa.string()),
    ]
)


@dataclass
class FileCalls:
    """What one file holds: its calls (``calls``, or ``table`` in ``RANK_CALLS_SCHEMA``), its communicators'
    members, and the training steps it saw."""

    file_name: str
    calls: list[RankCall]
    members: dict[str, set[str]]
    steps: set[int]
    warnings: list[str]
    table: pa.Table | None = None

    def where(self, line: int) -> str:
        """Where a record of ``table`` is: its ``line``, or the ``where`` of ``calls[line]`` (a table of them)."""
        return self.calls[line].where if self.calls else f"{self.file_name}: line {line}"


class OnlyPointToPoint(ResultFileError):
    """A file of a job whose process completed only sends and receives (a pipeline stage between two
    data-parallel reductions): the job's other files are read, and it is named in a warning."""
