"""Start a measurement on local processes, follow its progress, and leave nothing running behind.

The launcher starts ``world_size`` copies of ``python -m emuplan.measure`` with the environment
torchrun would give them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), all in one new
process group. Any worker that exits non-zero, a measurement that outlives its timeout, or a
cancel kills the whole group with SIGKILL and raises; workers also die with the launcher
(``PR_SET_PDEATHSIG``). Only a complete result (rank 0's CSV, written last and atomically) is returned.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emuplan.child_memory import MB, memory_limited
from emuplan.measure.options import (
    BACKENDS,
    MAX_ITERATIONS,
    MAX_LOCAL_WORLD_SIZE,
    MAX_TIMED_CALLS,
    MAX_TIMEOUT_S,
    MAX_WARMUP,
    MeasurementOptions,
)
from emuplan.measure.workload import (
    MeasuredCollective,
    MeasurementError,
    group_size_notes,
    measurement_steps,
    planned_trials,
)
from emuplan.wording import plural

# Share of the machine's available memory the workers may take together.
MEMORY_SHARE = 0.5
# What a local gloo worker holds, measured (peak RssAnon and RssFile sampled from /proc while real
# workers ran; torch 2.13 CPU, tests/unit/test_measure_limits.py checks it still holds): 149 MiB of its
# own once torch is imported and the group joined, and 155 MiB of torch's libraries, which all ranks
# share. On top: the two byte buffers, and gloo's scratch copy of up to one whole buffer (all-gather of
# 256 MiB: 768 MiB over the base, for 512 MiB of buffers).
WORKER_PRIVATE_BYTES = 160 * 2**20
SHARED_LIBRARY_BYTES = 160 * 2**20
# Per timed call and rank: its start and end stamps (16 B) and their pickled copy for the gather, on
# every rank; rank 0 also holds every rank's as NumPy arrays, Python lists and JSON text (measured: 3000
# × 100 calls on 2 ranks added 15 MiB to rank 1 and 37 MiB to rank 0).
STAMP_BYTES_PER_CALL = 64
RECORD_BYTES_PER_CALL = 128
STDERR_TAIL_LINES = 8
# What a timed call takes at the very least on local ranks (a barrier and the collective, its bytes moved at
# memory speed), to refuse a measurement that cannot end within its timeout before it holds the machine that
# long. Far below what is measured: an all-reduce of 971 KB on 4 gloo ranks takes 2.1 ms at best (0.46 GB/s),
# a small call ~1.7 ms on 2 loaded ranks.
MIN_CALL_S = 20e-6
MAX_LOCAL_BYTES_PER_S = 20e9


class MeasurementCancelled(MeasurementError):
    """The measurement was cancelled before it finished."""


@dataclass(frozen=True)
class MeasurementResult:
    """A finished measurement: the per-iteration CSV for the importer and the worker's JSON record."""

    csv_text: str
    record: dict[str, Any]
    steps: list[MeasuredCollective]
    notes: list[str] = field(default_factory=list)


def _available_memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class MemoryEstimate:
    """What a local measurement is expected to hold at its peak, in bytes."""

    per_rank: int  # one worker's own memory: its base, buffers, gloo's scratch and its timing stamps
    total: int  # every rank's, rank 0's record of everyone's stamps, and the libraries they share once


def estimated_memory(steps: list[MeasuredCollective], world_size: int, timed_calls: int) -> MemoryEstimate:
    """The peak memory of ``world_size`` local workers running ``steps``, ``timed_calls`` calls per rank."""
    largest = max(step.bytes_total for step in steps)
    buffers = largest + max(step.output_bytes for step in steps)
    per_rank = WORKER_PRIVATE_BYTES + buffers + largest + timed_calls * STAMP_BYTES_PER_CALL
    record = world_size * timed_calls * RECORD_BYTES_PER_CALL
    return MemoryEstimate(per_rank=per_rank, total=world_size * per_rank + record + SHARED_LIBRARY_BYTES)


def shortest_duration_s(steps: list[MeasuredCollective], iterations: int) -> float:
    """The least time ``iterations`` of ``steps`` can take on local processes (``MIN_CALL_S`` a call, its bytes at
    ``MAX_LOCAL_BYTES_PER_S``)."""
    return iterations * sum(MIN_CALL_S + step.bytes_total / MAX_LOCAL_BYTES_PER_S for step in steps)


def _check_bounds(options: MeasurementOptions) -> None:
    if not 1 <= options.world_size <= MAX_LOCAL_WORLD_SIZE:
        raise MeasurementError(f"world size must be between 1 and {MAX_LOCAL_WORLD_SIZE}, got {options.world_size}")
    if options.backend not in BACKENDS:
        raise MeasurementError(f"backend must be one of {', '.join(BACKENDS)}, got {options.backend!r}")
    if options.iterations is not None and not 1 <= options.iterations <= MAX_ITERATIONS:
        raise MeasurementError(f"iterations must be between 1 and {MAX_ITERATIONS}, got {options.iterations}")
    if not 0 <= options.warmup <= MAX_WARMUP:
        raise MeasurementError(f"warm-up iterations must be between 0 and {MAX_WARMUP}, got {options.warmup}")
    if not 0 < options.timeout_s <= MAX_TIMEOUT_S:
        raise MeasurementError(f"timeout must be positive and at most {MAX_TIMEOUT_S:g} s, got {options.timeout_s:g} s")


def check_options(document: dict[str, Any], options: MeasurementOptions) -> list[MeasuredCollective]:
    """Everything that can be refused before a process starts; returns the steps to run."""
    _check_bounds(options)
    steps = measurement_steps(document, options.world_size, options.workload)
    trials = planned_trials(document)
    if options.iterations is None and trials > MAX_ITERATIONS:
        raise MeasurementError(
            f"the plan has {trials} trials, more than the {MAX_ITERATIONS} iterations a measurement may run; "
            "choose fewer iterations"
        )
    iterations = options.warmup + (options.iterations or trials)
    timed_calls = iterations * len(steps)
    if timed_calls > MAX_TIMED_CALLS:
        raise MeasurementError(
            f"{iterations} iterations of {len(steps)} collectives are "
            f"{timed_calls} timed calls per rank, more than the {MAX_TIMED_CALLS} a measurement may make; "
            "choose fewer iterations or warm-up iterations"
        )
    estimate = estimated_memory(steps, options.world_size, timed_calls)
    available = _available_memory_bytes()
    if available is not None and estimate.total > available * MEMORY_SHARE:
        raise MeasurementError(
            f"{options.world_size} local processes would need about {estimate.total / 2**30:.1f} GiB "
            f"({estimate.per_rank / 2**20:.0f} MiB per rank: the worker itself, its buffers and gloo's copy of "
            f"the largest), more than half the {available / 2**30:.1f} GiB available; use fewer processes, or "
            "measure this plan on a cluster with --torchrun"
        )
    shortest_s = shortest_duration_s(steps, iterations)
    if shortest_s > options.timeout_s:
        raise MeasurementError(
            f"{iterations} iterations of {plural(len(steps), 'collective')} take at least {shortest_s:.0f} s on "
            f"local processes ({MIN_CALL_S * 1e6:g} µs a call and its bytes at "
            f"{MAX_LOCAL_BYTES_PER_S / 1e9:g} GB/s, far faster than measured), more than the timeout of "
            f"{options.timeout_s:g} s; choose fewer iterations or a longer timeout (at most {MAX_TIMEOUT_S:g} s)"
        )
    return steps


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stderr_tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-STDERR_TAIL_LINES:])


def _exit_description(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


class LocalLauncher:
    """A measurement of one or more plans, one after the other on the same local processes (starting
    processes that import torch is most of a small plan's time). ``run()`` blocks and returns one result
    per plan; ``cancel()`` may come from any thread. ``on_event`` receives "launching" and then rank 0's
    progress events ("started", "iteration", "finished", each with the plan's index in ``plan``)."""

    def __init__(
        self,
        documents: list[dict[str, Any]],
        options: MeasurementOptions,
        on_event: Callable[[dict[str, Any]], None] = lambda _event: None,
    ):
        if not documents:
            raise MeasurementError("no plan to measure")
        self.documents = documents
        self.options = options
        self.on_event = on_event
        self.steps = [check_options(document, options) for document in documents]
        self.worker_pids: list[int] = []
        self._cancelled = threading.Event()
        self._processes: list[subprocess.Popen] = []
        self._progress_reader: threading.Thread | None = None

    def cancel(self) -> None:
        self._cancelled.set()

    def run(self) -> list[MeasurementResult]:
        self.on_event({"event": "launching", "world_size": self.options.world_size, "backend": self.options.backend})
        with tempfile.TemporaryDirectory(prefix="emuplan-measure-") as scratch:
            workdir = Path(scratch)
            try:
                self._start(workdir)
                self._wait(workdir)
            finally:
                self._kill_all()
            return [
                MeasurementResult(
                    csv_text=(workdir / f"measured{index}.csv").read_text(),
                    record=json.loads((workdir / f"measured{index}.json").read_text()),
                    steps=steps,
                    notes=group_size_notes(steps, self.options.world_size),
                )
                for index, steps in enumerate(self.steps)
            ]

    def _start(self, workdir: Path) -> None:
        plan_arguments = []
        for index, document in enumerate(self.documents):
            (workdir / f"plan{index}.json").write_text(json.dumps(document))
            plan_arguments += [
                "--plan",
                str(workdir / f"plan{index}.json"),
                "--output",
                str(workdir / f"measured{index}.csv"),
            ]
        command = [sys.executable, "-m", "emuplan.measure", *plan_arguments, *self.options.worker_arguments()]
        world_size = self.options.world_size
        base_env = {
            **os.environ,
            "WORLD_SIZE": str(world_size),
            "LOCAL_WORLD_SIZE": str(world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(_free_port()),
            "OMP_NUM_THREADS": "1",  # as torchrun sets it: ranks share the cores
            "EMUPLAN_MEASURE_PARENT_PID": str(os.getpid()),
        }
        process_group = 0  # the first worker founds the group, the others join it
        for rank in range(world_size):
            with (workdir / f"rank{rank}.stderr").open("wb") as stderr:
                process = subprocess.Popen(
                    memory_limited(command, self.options.memory_mb * MB),
                    env={**base_env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    stderr=stderr,
                    process_group=process_group,
                )
            self._processes.append(process)
            self.worker_pids.append(process.pid)
            process_group = self._processes[0].pid
        self._progress_reader = threading.Thread(
            target=self._follow_progress, args=(self._processes[0].stdout,), daemon=True
        )
        self._progress_reader.start()

    def _follow_progress(self, stream) -> None:
        for line in stream:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.on_event(event)

    def _wait(self, workdir: Path) -> None:
        deadline = time.monotonic() + self.options.timeout_s
        while True:
            if self._cancelled.is_set():
                raise MeasurementCancelled("the measurement was cancelled")
            codes = [process.poll() for process in self._processes]
            failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                # One rank's failure makes its peers fail too, so name every rank seen failing.
                described = "; ".join(f"rank {rank} {_exit_description(code)}" for rank, code in failed)
                tail = _stderr_tail(workdir / f"rank{failed[0][0]}.stderr")
                raise MeasurementError(f"measurement failed: {described}" + (f"\n{tail}" if tail else ""))
            if all(code == 0 for code in codes):
                return
            if time.monotonic() > deadline:
                running = [rank for rank, code in enumerate(codes) if code is None]
                raise MeasurementError(
                    f"measurement timed out after {self.options.timeout_s:g} s; rank(s) "
                    f"{', '.join(map(str, running))} still running were killed"
                )
            self._cancelled.wait(0.05)

    def _kill_all(self) -> None:
        if not self._processes:
            return
        with contextlib.suppress(ProcessLookupError):  # every worker has already exited
            os.killpg(self._processes[0].pid, signal.SIGKILL)
        for process in self._processes:
            process.wait()
        if self._progress_reader is not None:
            self._progress_reader.join()  # reads to the end of rank 0's closed pipe
        for process in self._processes:
            if process.stdout:
                process.stdout.close()


def run_local_measurement(
    document: dict[str, Any],
    options: MeasurementOptions,
    on_event: Callable[[dict[str, Any]], None] = lambda _event: None,
) -> MeasurementResult:
    [result] = LocalLauncher([document], options, on_event).run()
    return result
