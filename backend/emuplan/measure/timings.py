"""From every rank's start/end timestamps to per-iteration completion times and the CSV we import.

A collective's completion time is max(end) − min(start) across ranks: from the moment the first rank
enters it to the moment the last rank leaves it. Timestamps are monotonic-clock nanoseconds on rank 0's
clock: ranks on rank 0's host share it; ranks on other hosts move theirs onto it with
``to_reference_clock`` and two offset estimates (``worker.estimate_clock``), one taken before and one
after the measurement, because two hosts' clocks drift apart by up to tens of µs per second.
"""

import csv
import io
from dataclasses import dataclass

import numpy as np

from emuplan.measure.workload import MeasuredCollective

# Header of the per-iteration file: ``emuplan import`` reads the unit from the ``_us`` suffixes.
CSV_COLUMNS = ("iteration", "collective", "size_bytes", "label", "start_us", "duration_us")


@dataclass(frozen=True)
class ClockEstimate:
    """rank 0's clock − this rank's clock, estimated around ``local_ns`` (this rank's clock)."""

    local_ns: int
    offset_ns: int
    round_trip_ns: int  # of the ping-pong the estimate comes from: the true offset is within ±half of it


SHARED_CLOCK = ClockEstimate(local_ns=0, offset_ns=0, round_trip_ns=0)


def to_reference_clock(timestamps_ns: np.ndarray, before: ClockEstimate, after: ClockEstimate) -> np.ndarray:
    """This rank's timestamps on rank 0's clock, the offset interpolated linearly between the estimate
    taken before and the one taken after the measurement."""
    if after.local_ns == before.local_ns:
        return timestamps_ns + before.offset_ns
    drift = (after.offset_ns - before.offset_ns) / (after.local_ns - before.local_ns)
    offsets = before.offset_ns + drift * (timestamps_ns - before.local_ns)
    return timestamps_ns + np.rint(offsets).astype(np.int64)


@dataclass(frozen=True)
class CollectiveTimings:
    """Completion of every call: arrays shaped (warm-up + measured iterations, steps)."""

    start_ns: np.ndarray  # min(start) across ranks
    completion_ns: np.ndarray  # max(end) − min(start) across ranks
    warmup: int

    @property
    def measured_completion_ns(self) -> np.ndarray:
        return self.completion_ns[self.warmup :]

    @property
    def warmup_completion_ns(self) -> np.ndarray:
        return self.completion_ns[: self.warmup]


def collective_timings(rank_start_ns: np.ndarray, rank_end_ns: np.ndarray, warmup: int) -> CollectiveTimings:
    """``rank_*_ns`` (on rank 0's clock) are shaped (ranks, iterations, steps)."""
    if rank_start_ns.shape != rank_end_ns.shape or rank_start_ns.ndim != 3:
        raise ValueError(
            f"start and end timestamps must share a (ranks, iterations, steps) shape, got "
            f"{rank_start_ns.shape} and {rank_end_ns.shape}"
        )
    first_start = rank_start_ns.min(axis=0)
    return CollectiveTimings(start_ns=first_start, completion_ns=rank_end_ns.max(axis=0) - first_start, warmup=warmup)


def per_iteration_csv(steps: list[MeasuredCollective], timings: CollectiveTimings) -> str:
    """One row per measured call (warm-up excluded), iterations numbered from 0, times in µs with ns
    resolution, start relative to the first measured call."""
    completion = timings.measured_completion_ns
    starts = timings.start_ns[timings.warmup :]
    origin = int(starts.min()) if starts.size else 0
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for iteration in range(completion.shape[0]):
        for index, step in enumerate(steps):
            writer.writerow(
                (
                    iteration,
                    step.op.value,
                    step.bytes_total,
                    step.label,
                    f"{(int(starts[iteration, index]) - origin) / 1000:.3f}",
                    f"{int(completion[iteration, index]) / 1000:.3f}",
                )
            )
    return out.getvalue()
