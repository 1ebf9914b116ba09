"""Overhead of the measurement harness on an 8-byte all-reduce, against a bare all_reduce loop.

Both run in the same gloo process group on ``--world-size`` local processes, in alternating blocks of
``--block`` iterations (so both see the same load from the rest of the machine):

- harness: the worker's own code (``prepare_calls`` + ``time_calls`` + ``collective_timings``): barrier,
  monotonic start, all-reduce, monotonic end per iteration; time per iteration = max(end) − min(start)
  across ranks, as stored in a measured run;
- baseline: ``torch.distributed.all_reduce`` on a tensor of the same element type, called back to back
  with no barrier and no clock reads;
  time per iteration = (last rank's end − first rank's start) / iterations of the block.

Both loops run with the worker's threads scheduled as ``emuplan measure`` schedules them
(``worker.timing_scheduling``): first as it does by default (SCHED_FIFO where allowed), then, for
comparison, at normal priority, where the scheduler's wake-up delays dominate both loops.

Each block of the harness is paired with the bare block before it: the figure is the median of the
per-block ratios (harness mean / bare mean) with their min–max. Target: that median ≤ 1.2 under the
default scheduling (the script exits 1 when it is missed). The harness percentiles show how much of its
mean is scheduling spikes.

    .venv/bin/python bench/bench_measure.py [--world-size 2] [--blocks 40] [--block 100]
"""

import argparse
import os
import socket
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from emuplan.measure.options import TimingScheduling
from emuplan.measure.timings import collective_timings
from emuplan.measure.worker import TORCH_DTYPES, prepare_calls, time_calls, timing_scheduling
from emuplan.measure.workload import measurement_steps
from paired import spread

TARGET_RATIO = 1.2
# Shaped like a stored plan: the KCCB size list and the planned collective it measures (float32, as gradients).
EIGHT_BYTE_ALL_REDUCE = {
    "trials": 1,
    "kccb": {"collective": "all_reduce", "data_sizes": [8]},
    "collectives": [{"op": "all_reduce", "bytes_total": 8, "bytes_per_rank": 8, "dtype": "float32", "label": "8 B"}],
}
WARMUP = 100


def bare_loop_ns(tensor: torch.Tensor, iterations: int) -> tuple[int, int]:
    dist.barrier()
    start = time.perf_counter_ns()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    return start, time.perf_counter_ns()


def rank_main(
    rank: int, world_size: int, port: int, scheduling: TimingScheduling, blocks: int, block: int, results
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=120))
    steps = measurement_steps(EIGHT_BYTE_ALL_REDUCE, world_size)
    calls = prepare_calls(steps, rank, world_size, torch.device("cpu"))
    # The same element type as the harness hands gloo: gloo's uint8 all-reduce alone is ~2x its float32 one.
    tensor = torch.zeros(8, dtype=torch.uint8).view(TORCH_DTYPES[steps[0].dtype])
    spans, starts, ends = [], [], []
    with timing_scheduling(scheduling) as policy:
        bare_loop_ns(tensor, WARMUP)
        time_calls(calls, WARMUP, dist.barrier, lambda: None)
        for _ in range(blocks):
            spans.append(bare_loop_ns(tensor, block))
            block_starts, block_ends = time_calls(calls, block, dist.barrier, lambda: None)
            starts.append(block_starts)
            ends.append(block_ends)
    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object((spans, np.concatenate(starts), np.concatenate(ends)), gathered, dst=0)
    if rank == 0:
        # A bare block's time per iteration: its last rank's end − its first rank's start, over the block.
        bare_block_ns = (
            np.array(
                [
                    max(item[0][number][1] for item in gathered) - min(item[0][number][0] for item in gathered)
                    for number in range(blocks)
                ]
            )
            / block
        )
        timings = collective_timings(
            np.stack([item[1] for item in gathered]), np.stack([item[2] for item in gathered]), 0
        )
        results.extend([policy, bare_block_ns, timings.completion_ns[:, 0].reshape(blocks, block)])
    dist.destroy_process_group()


def measure_overhead(scheduling: TimingScheduling, args: argparse.Namespace) -> float:
    """Runs both loops on fresh processes, prints what they measured and returns the median of the
    per-block ratios (harness mean / bare mean)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    results = mp.Manager().list()
    mp.spawn(
        rank_main,
        args=(args.world_size, port, scheduling, args.blocks, args.block, results),
        nprocs=args.world_size,
    )
    policy, bare_block_ns, completion_ns = results
    bare_block_us, harness = bare_block_ns / 1000, completion_ns / 1000
    block_ratios = harness.mean(axis=1) / bare_block_us
    p50, p90, p99 = np.percentile(harness, [50, 90, 99])
    print(f"scheduling {scheduling.value}: threads at {policy}")
    print(f"  bare all_reduce loop: {spread(bare_block_us, 2, ' µs')} per iteration (blocks' means)")
    print(f"  harness: mean {spread(harness.mean(axis=1), 2, ' µs')} (blocks' means); all iterations: "
          f"p50 {p50:.2f}, p90 {p90:.2f}, p99 {p99:.2f} µs")  # fmt: skip
    print(f"  harness / bare, paired blocks: {spread(block_ratios, 2)}x; harness p50 / bare mean: "
          f"{p50 / bare_block_us.mean():.2f}")  # fmt: skip
    return float(np.median(block_ratios))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--block", type=int, default=100, help="iterations per block")
    args = parser.parse_args()
    print(
        f"8-byte all-reduce, gloo, {args.world_size} local processes, "
        f"{args.blocks} alternating blocks of {args.block} iterations each way"
    )
    ratio = measure_overhead(TimingScheduling.REALTIME, args)
    measure_overhead(TimingScheduling.NORMAL, args)
    ok = ratio <= TARGET_RATIO
    print(f"harness overhead as `emuplan measure` runs it: median of paired blocks {ratio:.2f}x "
          f"(target ≤ {TARGET_RATIO}x) {'ok' if ok else 'MISSED'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
