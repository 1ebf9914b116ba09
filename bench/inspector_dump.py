"""A realistic NCCL Inspector dump directory for the benches: one ``<host>-pid<pid>.log`` per rank, written as
the plugin writes them (``ext-profiler/inspector``, format v4.0: one compact object per line).

The job: 8 hosts × 8 GPUs = 64 ranks, three kinds of communicator — the world (64 ranks), a tensor-parallel group
per host (8 ranks on one host) and a data-parallel group per GPU index (8 ranks, one per host). A training step
is 24 all-reduces of 16 MiB in each TP group, a reduce-scatter and an all-gather of a 200 MiB gradient bucket
(25 MiB a rank) in each DP group, twice, and one 4-byte all-reduce of the loss in the world; ``coll_sn``
counts each communicator's calls. The dump thread sees most calls but not all (it keeps only the last one
completed per communicator between two dumps): each rank misses 2 % of them, so some calls are recorded by
only part of their communicator, as in real dumps. Times are whole µs with a log-normal spread around the
call's ideal time, rank 37 about 15 % slower; algbw and busbw as the plugin computes and prints them.
"""

import random
from pathlib import Path

HOSTS, GPUS = 8, 8
RANKS = HOSTS * GPUS
SLOW_RANK = 37
MISSED = 0.02
# (communicator kind, NCCL name, bytes a rank passes: coll_msg_size_bytes, calls a step, ideal µs)
STEP = (
    ("tp", "AllReduce", 16 * 2**20, 24, 180.0),
    ("dp", "ReduceScatter", 25 * 2**20, 2, 2100.0),
    ("dp", "AllGather", 25 * 2**20, 2, 2000.0),
    ("world", "AllReduce", 4, 1, 45.0),
)


def _communicators() -> dict[str, list[tuple[str, int]]]:
    """kind → [(communicator id, its size)] per rank: each rank's communicator of that kind, and its rank in it."""
    world = "0x7f3a9c2e41d8b0"
    return {
        "world": [(world, rank) for rank in range(RANKS)],
        "tp": [(f"0x5e1{rank // GPUS:02x}c0d3a9f7", rank % GPUS) for rank in range(RANKS)],
        "dp": [(f"0x2b8{rank % GPUS:02x}e4f1c6a0", rank // GPUS) for rank in range(RANKS)],
    }


SIZES = {"world": RANKS, "tp": GPUS, "dp": HOSTS}
FACTORS = {
    "AllReduce": lambda n: 2 * (n - 1) / n,
    "ReduceScatter": lambda n: (n - 1) / n,
    "AllGather": lambda n: (n - 1) / n,
}


def write_dump(directory: Path, records: int, seed: int = 0) -> list[Path]:
    """``records`` Inspector records over the 64 ranks' files (as even as they divide) in ``directory``."""
    rng = random.Random(seed)
    communicators = _communicators()
    per_rank = [records // RANKS + (rank < records % RANKS) for rank in range(RANKS)]
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(RANKS):
        host, pid = f"gpu-node-{rank // GPUS:02d}", 40000 + rank
        slowdown = 1.15 if rank == SLOW_RANK else 1.0
        sn: dict[str, int] = {}
        clock = 1764000000000000 + rank * 3
        lines: list[str] = []
        while len(lines) < per_rank[rank]:
            for kind, coll, message, calls, ideal_us in STEP:
                comm, comm_rank = communicators[kind][rank]
                n_ranks = SIZES[kind]
                traffic = message * n_ranks if coll in ("ReduceScatter", "AllGather") else message
                for _ in range(calls):
                    sn[comm] = sn.get(comm, 0) + 1
                    # The same call's draw on every rank (seeded by communicator and call), then this rank's own.
                    call_us = ideal_us * random.Random(f"{comm}/{sn[comm]}").lognormvariate(0.0, 0.08)
                    time_us = max(1, round(call_us * slowdown * rng.lognormvariate(0.0, 0.02)))
                    clock += time_us + 40
                    if rng.random() < MISSED or len(lines) >= per_rank[rank]:
                        continue
                    algbw = traffic / 1e9 / (time_us / 1e6)
                    busbw = algbw * FACTORS[coll](n_ranks)
                    lines.append(
                        f'{{"header":{{"id":"{comm}","rank":{comm_rank},"n_ranks":{n_ranks},"nnodes":'
                        f'{1 if kind == "tp" else HOSTS}}},"metadata":{{"inspector_output_format_version":"v4.0",'
                        f'"git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":{clock + 250},'
                        f'"hostname":"{host}","pid":{pid}}},"coll_perf":{{"coll":"{coll}","coll_sn":{sn[comm]},'
                        f'"coll_msg_size_bytes":{message},"coll_exec_time_us":{time_us},'
                        f'"coll_timing_source":"kernel_gpu","coll_algobw_gbs":{algbw:.6f},'
                        f'"coll_busbw_gbs":{busbw:.6f}}}}}\n'
                    )
        path = directory / f"{host}-pid{pid}.log"
        path.write_text("".join(lines))
        paths.append(path)
    return paths
