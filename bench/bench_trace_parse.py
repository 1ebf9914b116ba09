"""Reading PyTorch profiler traces of 10 k to 1 M events: the time per event, which should not grow with the trace.

The job: two gloo ranks of a data-parallel step (``profiler_trace.py``: per step 12 CPU ops, three buckets
all-reduced and a reduce-scatter gloo runs as an all-reduce, 21 events), one trace per rank of N events each.
Each size is read once per round (a small one several times in a row, ``MIN_EVENTS_A_CASE``), in a rotating order
(``paired.py``), in this process after a warm-up read: ``observed.parse_observed`` of the two traces, as an
upload's import runs it (JSON → the calls gloo ran and the c10d calls that asked for them → each call's step →
the ranks joined into calls → the run's samples and observed document), with a budget that admits every size
(the server's default pool turns away a trace much past 100 MB, EMUPLAN_MAX_TRACE_EVENTS one of more than 1 M
events).

Target: each larger size's time per event ≤ 1.5× the smallest size's, as paired ratios (the same round's, their
median: ``paired.py``'s convention): linear reading. Before the sweep that puts calls in steps, every step was
tried per call (O(calls × steps)): 100 k events took 16 s, ~n^1.6; and with the cyclic garbage collector running
while a trace was read (``json_input.collection_paused``) 1 M events took 56 s, 28 µs an event against 17 µs at
10 k.

    .venv/bin/python bench/bench_trace_parse.py [--sizes 10000,100000,1000000] [--rounds R]
"""

import argparse
import gc
import sys
import time

from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.formats.observed import parse_observed
from paired import load_average, missed_targets, paired_rounds, ratios, spread
from profiler_trace import event_count, trace_files

FLAT_LIMIT = 1.5
# Each size is read as many times in a row as it takes to read this many events: a 10 k-event read lasts ~0.2 s,
# within which one load spike on the shared machine doubled its time per event.
MIN_EVENTS_A_CASE = 200_000
# Enough for the largest size: the bench measures time, the server's own limits are tested elsewhere.
UNBOUNDED = ImportLimits(max_decompressed_bytes=1 << 40, max_trace_events=1 << 40, pool_bytes=1 << 40)


def read_seconds(files: list[tuple[str, bytes]], times: int = 1) -> float:
    """Seconds ``times`` reads of ``files`` took in all."""
    gc.collect()  # the previous size's garbage is not this one's cost
    seconds = 0.0
    for _ in range(times):
        with ImportBudget(UNBOUNDED) as budget:
            start = time.perf_counter()
            parsed = parse_observed(files, budget=budget)
            seconds += time.perf_counter() - start
        assert parsed.ranks == 2 and not parsed.warnings, parsed.warnings
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="events per trace, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))

    jobs = {size: trace_files(size) for size in sizes}
    events = {size: len(job) * event_count(size) for size, job in jobs.items()}
    times = {size: max(1, MIN_EVENTS_A_CASE // events[size]) for size in sizes}
    megabytes = {size: sum(len(content) for _, content in job) / 1e6 for size, job in jobs.items()}
    read_seconds(jobs[sizes[0]])  # warm-up: imports, first allocations
    print(f"PyTorch profiler traces read: 2 ranks × {', '.join(f'{size:,}' for size in sizes)} events, "
          f"{args.rounds} paired rounds (load {load_average()})")  # fmt: skip
    cases = {size: (lambda job=jobs[size], n=times[size]: read_seconds(job, n)) for size in sizes}
    values = paired_rounds(cases, args.rounds)
    per_event = {size: [seconds / (events[size] * times[size]) * 1e6 for seconds in values[size]] for size in sizes}
    for size in sizes:
        reads = [seconds / times[size] for seconds in values[size]]
        each = spread(per_event[size], digits=2, unit=" µs")
        print(f"  {size:>9,} events a trace ({megabytes[size]:6.1f} MB, read {times[size]}× a round)  "
              f"{spread(reads, unit=' s')} a read; {each} an event")  # fmt: skip
    smallest = sizes[0]
    checks = [
        (f"µs an event, {size:,} ÷ {smallest:,}", ratios(per_event, size, smallest), FLAT_LIMIT) for size in sizes[1:]
    ]
    failed = missed_targets(checks)
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
