"""Overhead of the measurement harness on an 8-byte all-reduce, against a bare all_reduce loop.

Both run in the same gloo process group, one after the other, on ``--world-size`` local processes:

- harness: the worker's own code (``prepare_calls`` + ``time_calls`` + ``collective_timings``): barrier,
  monotonic start, all-reduce, monotonic end per iteration; time per iteration = max(end) − min(start)
  across ranks, as stored in a measured run;
- baseline: ``torch.distributed.all_reduce`` called back to back ``--iterations`` times with no barrier
  and no clock reads; time per iteration = (last rank's end − first rank's start) / iterations.

Target: harness mean / baseline mean ≤ 1.2.

    .venv/bin/python bench/bench_measure.py [--world-size 2] [--iterations 2000] [--repeat 5]
"""

import argparse
import os
import socket
import statistics
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from emuplan.measure.timings import collective_timings
from emuplan.measure.worker import prepare_calls, time_calls
from emuplan.measure.workload import measurement_steps

TARGET_RATIO = 1.2
EIGHT_BYTE_ALL_REDUCE = {"trials": 1, "kccb": {"collective": "all_reduce", "data_sizes": [8]}}
WARMUP = 100


def bare_loop_ns(tensor: torch.Tensor, iterations: int) -> tuple[int, int]:
    dist.barrier()
    start = time.perf_counter_ns()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    return start, time.perf_counter_ns()


def harness_completion_ns(iterations: int, rank: int, world_size: int) -> np.ndarray | None:
    calls = prepare_calls(measurement_steps(EIGHT_BYTE_ALL_REDUCE, world_size), rank, world_size, torch.device("cpu"))
    starts, ends = time_calls(calls, WARMUP + iterations, dist.barrier, lambda: None)
    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object((starts, ends), gathered, dst=0)
    if rank != 0:
        return None
    timings = collective_timings(
        np.stack([item[0] for item in gathered]), np.stack([item[1] for item in gathered]), WARMUP
    )
    return timings.measured_completion_ns[:, 0]


def rank_main(rank: int, world_size: int, port: int, iterations: int, repeat: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=120))
    tensor = torch.zeros(2, dtype=torch.float32)  # 8 bytes
    bare_loop_ns(tensor, WARMUP)
    for _ in range(repeat):
        start, end = bare_loop_ns(tensor, iterations)
        spans = [None] * world_size if rank == 0 else None
        dist.gather_object((start, end), spans, dst=0)
        completion = harness_completion_ns(iterations, rank, world_size)
        if rank == 0:
            bare_us = (max(s[1] for s in spans) - min(s[0] for s in spans)) / iterations / 1000
            percentiles = np.percentile(completion, [50, 90, 99]) / 1000
            results.append((bare_us, float(completion.mean()) / 1000, *percentiles.tolist()))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    results = mp.Manager().list()
    mp.spawn(rank_main, args=(args.world_size, port, args.iterations, args.repeat, results), nprocs=args.world_size)

    print(f"8-byte all-reduce, gloo, {args.world_size} local processes, {args.iterations} iterations × {args.repeat}")
    print("round  bare loop µs/iter  harness mean µs  p50 µs  p90 µs  p99 µs  mean ratio  p50 ratio")
    for number, (bare_us, mean_us, p50_us, p90_us, p99_us) in enumerate(results, start=1):
        print(
            f"{number:>5}  {bare_us:>17.2f}  {mean_us:>15.2f}  {p50_us:>6.1f}  {p90_us:>6.1f}  {p99_us:>6.1f}  "
            f"{mean_us / bare_us:>10.2f}  {p50_us / bare_us:>9.2f}"
        )
    bare = statistics.median(r[0] for r in results)
    harness_mean = statistics.median(r[1] for r in results)
    harness_p50 = statistics.median(r[2] for r in results)
    ratio = harness_mean / bare
    print(
        f"median of rounds: bare {bare:.2f} µs/iter; harness mean {harness_mean:.2f} µs (ratio {ratio:.2f}), "
        f"p50 {harness_p50:.2f} µs (ratio {harness_p50 / bare:.2f}); target mean ratio ≤ {TARGET_RATIO}: "
        f"{'OK' if ratio <= TARGET_RATIO else 'ABOVE TARGET'}"
    )


if __name__ == "__main__":
    main()
