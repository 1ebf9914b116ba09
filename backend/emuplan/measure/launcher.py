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

from emuplan.measure.options import BACKENDS, MAX_LOCAL_WORLD_SIZE, MeasurementOptions
from emuplan.measure.workload import (
    MeasuredCollective,
    MeasurementError,
    group_size_notes,
    measurement_steps,
    planned_trials,
)

# Share of the machine's available memory the workers' buffers may take together.
MEMORY_SHARE = 0.5
STDERR_TAIL_LINES = 8


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


def check_options(document: dict[str, Any], options: MeasurementOptions) -> list[MeasuredCollective]:
    """Everything that can be refused before a process starts; returns the steps to run."""
    if not 1 <= options.world_size <= MAX_LOCAL_WORLD_SIZE:
        raise MeasurementError(f"world size must be between 1 and {MAX_LOCAL_WORLD_SIZE}, got {options.world_size}")
    if options.backend not in BACKENDS:
        raise MeasurementError(f"backend must be one of {', '.join(BACKENDS)}, got {options.backend!r}")
    if options.iterations is not None and options.iterations < 1:
        raise MeasurementError(f"iterations must be at least 1, got {options.iterations}")
    if options.warmup < 0:
        raise MeasurementError(f"warm-up iterations must be 0 or more, got {options.warmup}")
    if options.timeout_s <= 0:
        raise MeasurementError(f"timeout must be positive, got {options.timeout_s} s")
    steps = measurement_steps(document, options.world_size, options.workload)
    planned_trials(document)
    buffer_bytes = max(step.bytes_total for step in steps) + max(step.output_bytes for step in steps)
    available = _available_memory_bytes()
    if available is not None and buffer_bytes * options.world_size > available * MEMORY_SHARE:
        raise MeasurementError(
            f"the largest collective needs {buffer_bytes * options.world_size / 2**30:.1f} GiB of buffers over "
            f"{options.world_size} local processes, more than half the {available / 2**30:.1f} GiB available; "
            f"measure this plan on a cluster with --torchrun"
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
                    command,
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
