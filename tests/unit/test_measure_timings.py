"""Completion time = max(end) − min(start) across ranks; warm-up rows stay out of the imported CSV."""

import numpy as np

from emuplan.measure.timings import (
    SHARED_CLOCK,
    ClockEstimate,
    collective_timings,
    per_iteration_csv,
    to_reference_clock,
)
from emuplan.measure.workload import make_step
from emuplan.workload.collectives import CollectiveOp

# (ranks=2, iterations=3 of which 1 warm-up, steps=2), nanoseconds.
STARTS = np.array(
    [
        [[100, 300], [1000, 1300], [2000, 2300]],
        [[110, 290], [1005, 1310], [2010, 2290]],
    ]
)
ENDS = np.array(
    [
        [[200, 400], [1100, 1400], [2100, 2400]],
        [[190, 420], [1150, 1390], [2090, 2500]],
    ]
)
STEPS = [
    make_step(CollectiveOp.ALL_REDUCE, 971048, 2, {"label": "bucket 0"}, label="", where="test"),
    make_step(CollectiveOp.ALL_GATHER, 4096, 2, {}, label="all_gather 4096 B", where="test"),
]


def test_completion_is_last_end_minus_first_start_across_ranks() -> None:
    timings = collective_timings(STARTS, ENDS, warmup=1)
    assert timings.completion_ns.tolist() == [[100, 130], [150, 100], [100, 210]]
    assert timings.warmup_completion_ns.tolist() == [[100, 130]]
    assert timings.measured_completion_ns.tolist() == [[150, 100], [100, 210]]
    assert timings.start_ns.tolist() == [[100, 290], [1000, 1300], [2000, 2290]]


def test_other_hosts_clocks_move_onto_rank_0s_with_the_drift_between_two_estimates() -> None:
    # Rank 0's clock is 1000 ns ahead at local time 10_000 and 1100 ns ahead at 20_000: 10 ns per 1000 ns.
    before = ClockEstimate(local_ns=10_000, offset_ns=1000, round_trip_ns=40)
    after = ClockEstimate(local_ns=20_000, offset_ns=1100, round_trip_ns=50)
    local = np.array([[10_000, 15_000], [20_000, 30_000]])
    assert to_reference_clock(local, before, after).tolist() == [[11_000, 16_050], [21_100, 31_200]]
    assert to_reference_clock(local, SHARED_CLOCK, SHARED_CLOCK).tolist() == local.tolist()


def test_csv_holds_measured_iterations_only_in_microseconds() -> None:
    text = per_iteration_csv(STEPS, collective_timings(STARTS, ENDS, warmup=1))
    assert text.splitlines() == [
        "iteration,collective,size_bytes,label,start_us,duration_us",
        "0,all_reduce,971048,bucket 0,0.000,0.150",
        "0,all_gather,4096,all_gather 4096 B,0.300,0.100",
        "1,all_reduce,971048,bucket 0,1.000,0.100",
        "1,all_gather,4096,all_gather 4096 B,1.290,0.210",
    ]
