"""What each observed-in-training format (``nccl_inspector``, ``torch_profiler``) reads from one file, for
``observed`` to join the files of one job."""

from dataclasses import dataclass


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


@dataclass
class FileCalls:
    """What one file holds: its calls, its communicators' members, and the training steps it saw."""

    file_name: str
    calls: list[RankCall]
    members: dict[str, set[str]]
    steps: set[int]
    warnings: list[str]
