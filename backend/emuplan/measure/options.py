"""What a measurement is asked to do: its options, their defaults and their limits.

The CLI's ``emuplan measure`` options, the API's measurement request, our launcher and the torchrun
command all take them from here. Standard library only: every ``emuplan`` command imports this module
(``--help`` lists ``measure`` with its defaults), and none but ``measure`` needs the launcher.
"""

from dataclasses import dataclass
from enum import StrEnum


class WorkloadSource(StrEnum):
    KCCB = "kccb"
    COLLECTIVES = "collectives"


class TimingScheduling(StrEnum):
    """How the workers' threads are scheduled while the collectives are timed (``worker.timing_scheduling``)."""

    REALTIME = "realtime"  # SCHED_FIFO where allowed, so a woken thread never waits for another's time slice
    NORMAL = "normal"


BACKENDS = ("gloo", "nccl", "auto")
# auto: nccl when CUDA is available, else gloo (decided by each worker).
DEFAULT_BACKEND = "auto"
# Local processes, one rank each, on this one machine.
MAX_LOCAL_WORLD_SIZE = 64
# Bounds on the work one measurement may ask for: measured iterations (the plan's trials too, when no
# --iterations is given), warm-up iterations, timed collective calls per rank (each is a barrier and a
# collective: about 1.7 ms on two loaded CPU gloo ranks), and seconds.
MAX_ITERATIONS = 100_000
MAX_WARMUP = 10_000
MAX_TIMED_CALLS = 10_000_000
MAX_TIMEOUT_S = 3600.0
# What each worker may write to (RLIMIT_DATA, EMUPLAN_MEASURE_MEMORY_MB): torch, the backend and the buffers of the
# largest collective, twice.
DEFAULT_MEMORY_MB = 16384
# torchrun's --rdzv-endpoint until the user names the node that hosts rank 0's rendezvous.
DEFAULT_RENDEZVOUS = "HEAD_NODE:29500"


@dataclass(frozen=True)
class MeasurementOptions:
    world_size: int = 4
    backend: str = DEFAULT_BACKEND
    iterations: int | None = None  # None: the plan's trials
    warmup: int = 2
    workload: WorkloadSource = WorkloadSource.KCCB
    timeout_s: float = 600.0
    scheduling: TimingScheduling = TimingScheduling.REALTIME
    memory_mb: int = DEFAULT_MEMORY_MB  # each local worker's limit (``child_memory``); torchrun's are the user's

    def worker_arguments(self) -> list[str]:
        """The worker options these settings stand for, shared by our launcher and the torchrun command."""
        arguments = [
            "--warmup",
            str(self.warmup),
            "--workload",
            self.workload.value,
            "--backend",
            self.backend,
            "--timeout-s",
            f"{self.timeout_s:g}",
            "--scheduling",
            self.scheduling.value,
        ]
        if self.iterations is not None:
            arguments[:0] = ["--iterations", str(self.iterations)]
        return arguments
