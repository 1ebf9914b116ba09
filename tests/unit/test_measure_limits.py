"""How much a local measurement may ask for: iterations, warm-up, timed calls, time and memory, each
refused with its reason before a process starts; and the memory estimate held against real gloo
workers, sampled from /proc while they run."""

import threading
import time
from pathlib import Path

import pytest

from emuplan.measure.launcher import (
    SHARED_LIBRARY_BYTES,
    WORKER_PRIVATE_BYTES,
    LocalLauncher,
    check_options,
    estimated_memory,
)
from emuplan.measure.options import MeasurementOptions, TimingScheduling, WorkloadSource
from emuplan.measure.workload import MeasurementError

MiB = 2**20


def plan(op: str, bytes_total: int, count_per_step: int = 1, trials: int = 3) -> dict:
    return {
        "trials": trials,
        "kccb": {"collective": op, "data_sizes": [bytes_total], "iterations": trials},
        "collectives": [{"op": op, "bytes_total": bytes_total, "dtype": "float32", "count_per_step": count_per_step}],
    }


def options(**fields) -> MeasurementOptions:
    defaults = {"world_size": 2, "backend": "gloo", "workload": WorkloadSource.COLLECTIVES}
    return MeasurementOptions(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("document", "fields", "message"),
    [
        (plan("all_reduce", 4096), {"iterations": 100_001},
         "iterations must be between 1 and 100000, got 100001"),
        (plan("all_reduce", 4096), {"warmup": 10_001}, "warm-up iterations must be between 0 and 10000, got 10001"),
        (plan("all_reduce", 4096), {"timeout_s": 86400}, "timeout must be positive and at most 3600 s, got 86400 s"),
        # The fuzzer's plan: nothing asked, the plan's own trials.
        (plan("all_reduce", 4096, trials=2**40), {},
         "the plan has 1099511627776 trials, more than the 100000 iterations a measurement may run; choose fewer "
         "iterations"),
        (plan("all_reduce", 4096, count_per_step=200), {"iterations": 100_000},
         "100002 iterations of 200 collectives are 20000400 timed calls per rank, more than the 10000000 a "
         "measurement may make; choose fewer iterations or warm-up iterations"),
        # 100,002 all-reduces of 16 MiB: at least 86 s at 20 GB/s, however fast the machine.
        (plan("all_reduce", 16 * MiB), {"iterations": 100_000, "timeout_s": 60},
         "100002 iterations of 1 collective take at least 86 s on local processes (20 µs a call and its bytes at "
         "20 GB/s, far faster than measured), more than the timeout of 60 s; choose fewer iterations or a longer "
         "timeout (at most 3600 s)"),
    ],
)  # fmt: skip
def test_a_measurement_past_its_bounds_is_refused_with_the_reason(document: dict, fields: dict, message: str):
    with pytest.raises(MeasurementError) as refused:
        check_options(document, options(**fields))
    assert str(refused.value) == message


def test_the_memory_estimate_counts_the_worker_its_buffers_gloos_copy_and_the_stamps():
    steps = check_options(plan("all_gather", 256 * MiB), options(iterations=3, warmup=1))
    estimate = estimated_memory(steps, 2, timed_calls=4)
    # Input buffer 256 MiB (the whole, as allocated), output 256 MiB, gloo's copy of one whole buffer.
    assert estimate.per_rank == 160 * MiB + 3 * 256 * MiB + 4 * 64
    assert estimate.total == 2 * estimate.per_rank + 2 * 4 * 128 + 160 * MiB


def test_sixty_four_ranks_are_refused_for_their_own_memory_not_only_their_buffers():
    """64 workers of 1 GiB all-reduces: 64 × (160 MiB + 3 GiB); the reason names the per-rank figure."""
    with pytest.raises(MeasurementError) as refused:
        check_options(plan("all_reduce", 2**30), options(world_size=64, iterations=3))
    assert str(refused.value).startswith(
        "64 local processes would need about 202.2 GiB (3232 MiB per rank: the worker itself, its buffers and "
        "gloo's copy of the largest), more than half the "
    )


def peak_memory(launcher: LocalLauncher) -> dict[str, list[int]]:
    """Runs ``launcher`` and samples each worker's RssAnon and RssFile (bytes) every 20 ms until it ends."""
    peaks = {"RssAnon": [0] * launcher.options.world_size, "RssFile": [0] * launcher.options.world_size}
    running = True

    def sample() -> None:
        while running:
            for rank, pid in enumerate(list(launcher.worker_pids)):
                try:
                    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
                except OSError:  # not started yet, or already gone
                    continue
                for field, ranks in peaks.items():
                    if field in status:  # an exited worker not yet waited for has no memory left
                        ranks[rank] = max(ranks[rank], int(status[field].split()[0]) * 1024)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        launcher.run()
    finally:
        running = False
        sampler.join()
    return peaks


def test_real_gloo_workers_stay_within_the_estimate():
    """An all-gather of 64 MiB on two gloo ranks: each worker's own memory at its peak (RssAnon) stays within
    the per-rank estimate, and all of it with the shared libraries (RssFile, once) within the total. The
    buffers alone, all the old check counted (2 × 128 MiB), were not half of what the workers held."""
    document = plan("all_gather", 64 * MiB)
    launcher = LocalLauncher(
        [document], options(iterations=2, warmup=0, scheduling=TimingScheduling.NORMAL, timeout_s=300)
    )
    estimate = estimated_memory(launcher.steps[0], 2, timed_calls=2)
    peaks = peak_memory(launcher)
    assert all(WORKER_PRIVATE_BYTES / 2 < peak <= estimate.per_rank for peak in peaks["RssAnon"]), peaks
    assert sum(peaks["RssAnon"]) + max(peaks["RssFile"]) <= estimate.total, peaks
    assert max(peaks["RssFile"]) <= SHARED_LIBRARY_BYTES, peaks
    assert sum(peaks["RssAnon"]) > 2 * 2 * 128 * MiB, peaks
