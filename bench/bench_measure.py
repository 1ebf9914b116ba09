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

Target: harness mean / baseline mean ≤ 1.2 under the default scheduling. The harness percentiles show
how much of its mean is scheduling spikes.

    .venv/bin/python bench/bench_measure.py [--world-size 2] [--blocks 40] [--block 100]
"""

import argparse
import os
import socket
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
        bare_ns = sum(
            max(item[0][number][1] for item in gathered) - min(item[0][number][0] for item in gathered)
            for number in range(blocks)
        )
        timings = collective_timings(
            np.stack([item[1] for item in gathered]), np.stack([item[2] for item in gathered]), 0
        )
        results.extend([policy, bare_ns / (blocks * block), timings.completion_ns[:, 0]])
    dist.destroy_process_group()


def measure_overhead(scheduling: TimingScheduling, args: argparse.Namespace) -> float:
    """Runs both loops on fresh processes, prints what they measured and returns the ratio of the means."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    results = mp.Manager().list()
    mp.spawn(
        rank_main,
        args=(args.world_size, port, scheduling, args.blocks, args.block, results),
        nprocs=args.world_size,
    )
    policy, bare_ns, completion_ns = results
    bare_us, harness = bare_ns / 1000, completion_ns / 1000
    p50, p90, p99 = np.percentile(harness, [50, 90, 99])
    ratio = harness.mean() / bare_us
    print(f"scheduling {scheduling.value}: threads at {policy}")
    print(f"  bare all_reduce loop: {bare_us:.2f} µs per iteration")
    print(f"  harness: mean {harness.mean():.2f} µs, p50 {p50:.2f}, p90 {p90:.2f}, p99 {p99:.2f} µs per iteration")
    print(f"  ratio harness mean / bare: {ratio:.2f}; harness p50 / bare: {p50 / bare_us:.2f}")
    return ratio


def main() -> None:
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
    verdict = "OK" if ratio <= TARGET_RATIO else "ABOVE TARGET"
    print(f"harness overhead as `emuplan measure` runs it: {ratio:.2f}x (target ≤ {TARGET_RATIO}: {verdict})")


if __name__ == "__main__":
    main()
