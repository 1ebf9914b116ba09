"""The per-rank measurement program: ``python -m emuplan.measure --plan plan.json --output run.csv``.

It reads its rank and world size from torchrun's environment variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), so the same program runs under our local launcher and under
``torchrun --nnodes ... -m emuplan.measure ...`` on a cluster. Several ``--plan``/``--output`` pairs
are measured one after the other on the same processes. Each rank, for every iteration and
every collective of the plan: barrier, monotonic start, the collective (waited for on the device),
monotonic end. Rank 0 gathers all timestamps, writes the per-iteration CSV that ``emuplan import``
reads and a JSON record beside it (warm-up timings, per-rank timestamps on rank 0's clock, buffer sizes,
clock offset estimates).
Progress goes to rank 0's stdout as one JSON object per line; everything else goes to stderr.
"""

import argparse
import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from emuplan.measure.options import TimingScheduling, WorkloadSource
from emuplan.measure.record import RECORD_FORMAT
from emuplan.measure.timings import (
    SHARED_CLOCK,
    ClockEstimate,
    collective_timings,
    per_iteration_csv,
    to_reference_clock,
)
from emuplan.measure.workload import (
    MEASURED_DTYPES,
    MeasuredCollective,
    MeasurementError,
    measurement_steps,
    planned_trials,
)
from emuplan.workload.collectives import CollectiveOp

# Set by our local launcher: the worker dies with the launcher instead of lingering as an orphan.
PARENT_PID_ENV = "EMUPLAN_MEASURE_PARENT_PID"
CLOCK_SYNC_ROUNDS = 16
# The lowest real-time priority: a timing thread preempts every normal task, never the kernel's own real-time threads.
REALTIME_PRIORITY = 1
FIFO_NOT_PERMITTED = "SCHED_FIFO not permitted: needs CAP_SYS_NICE, which root has, or an rtprio limit of 1 or more"

TORCH_DTYPES = {name: getattr(torch, name) for name in MEASURED_DTYPES}


@dataclass(frozen=True)
class PreparedCall:
    """A collective bound to its buffers, so nothing but the call itself sits in the timed region."""

    run: Callable[[], None]
    handed_input_bytes: int
    handed_output_bytes: int


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def prepare_call(
    step: MeasuredCollective, input_buffer: torch.Tensor, output_buffer: torch.Tensor, rank: int, world_size: int
) -> PreparedCall:
    """Views of the shared byte buffers sized per the nccl-tests convention, and the call on them."""
    dtype = TORCH_DTYPES[step.dtype]
    whole = step.bytes_total
    piece = whole // world_size

    def view(buffer: torch.Tensor, size: int) -> torch.Tensor:
        return buffer[:size].view(dtype)

    op = step.op
    if op is CollectiveOp.ALL_REDUCE:
        tensor = view(input_buffer, whole)
        return PreparedCall(lambda: dist.all_reduce(tensor), _nbytes(tensor), _nbytes(tensor))
    if op is CollectiveOp.BROADCAST:
        tensor = view(input_buffer, whole)
        return PreparedCall(lambda: dist.broadcast(tensor, src=0), _nbytes(tensor), _nbytes(tensor))
    if op is CollectiveOp.REDUCE:
        tensor = view(input_buffer, whole)
        return PreparedCall(lambda: dist.reduce(tensor, dst=0), _nbytes(tensor), _nbytes(tensor))
    if op is CollectiveOp.ALL_GATHER:
        source, target = view(input_buffer, piece), view(output_buffer, whole)
        return PreparedCall(lambda: dist.all_gather_single(target, source), _nbytes(source), _nbytes(target))
    if op is CollectiveOp.REDUCE_SCATTER:
        source, target = view(input_buffer, whole), view(output_buffer, piece)
        return PreparedCall(lambda: dist.reduce_scatter_single(target, source), _nbytes(source), _nbytes(target))
    if op is CollectiveOp.ALL_TO_ALL:
        source, target = view(input_buffer, whole), view(output_buffer, whole)
        return PreparedCall(lambda: dist.all_to_all_single(target, source), _nbytes(source), _nbytes(target))
    if op is CollectiveOp.SEND_RECV:
        # Only the two stages talk; the other ranks time an empty call, which ends at once.
        if rank == step.sender:
            message = view(input_buffer, whole)
            return PreparedCall(lambda: dist.send(message, dst=step.receiver), _nbytes(message), 0)
        if rank == step.receiver:
            message = view(output_buffer, whole)
            return PreparedCall(lambda: dist.recv(message, src=step.sender), 0, _nbytes(message))
        return PreparedCall(lambda: None, 0, 0)
    raise MeasurementError(f"no torch.distributed call for {op.value}")


def prepare_calls(
    steps: list[MeasuredCollective], rank: int, world_size: int, device: torch.device
) -> list[PreparedCall]:
    """One input and one output byte buffer, as large as the largest step needs, shared by all steps."""
    input_buffer = torch.zeros(max(step.bytes_total for step in steps), dtype=torch.uint8, device=device)
    output_buffer = torch.zeros(max(step.output_bytes for step in steps) or 1, dtype=torch.uint8, device=device)
    return [prepare_call(step, input_buffer, output_buffer, rank, world_size) for step in steps]


def time_calls(
    calls: list[PreparedCall],
    iterations: int,
    barrier: Callable[[], None],
    wait_for_device: Callable[[], None],
    on_iteration: Callable[[int], None] = lambda _done: None,
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (monotonic ns, this rank's clock) of every call, shaped (iterations, calls)."""
    starts = np.zeros((iterations, len(calls)), dtype=np.int64)
    ends = np.zeros((iterations, len(calls)), dtype=np.int64)
    for iteration in range(iterations):
        for index, call in enumerate(calls):
            barrier()
            start = time.perf_counter_ns()
            call.run()
            wait_for_device()
            end = time.perf_counter_ns()
            starts[iteration, index] = start
            ends[iteration, index] = end
        on_iteration(iteration + 1)
    return starts, ends


@contextmanager
def timing_scheduling(requested: TimingScheduling) -> Iterator[str]:
    """Every thread of this process at SCHED_FIFO while the collectives are timed; yields the policy in force.

    Each collective wakes several threads on every rank (the caller, the backend's worker, its network
    loop), and the normal scheduler may leave a woken thread waiting for the running one's time slice to
    end. On 2 cores about 2% of 8-byte gloo all-reduces took 3-5 ms instead of 0.13 ms that way, which
    says more about the scheduler than about the collective. A SCHED_FIFO thread runs as soon as it wakes.
    That needs CAP_SYS_NICE or an rtprio limit; without either the loop runs at normal priority and the
    record says so. The kernel's real-time throttling still leaves other processes 5% of each core, so a
    dashboard on the same cores may answer late (up to ~1 s) while large collectives are reduced.
    """
    if requested is TimingScheduling.NORMAL:
        yield "normal priority (as asked)"
        return
    if not hasattr(os, "SCHED_FIFO"):
        yield "normal priority (no SCHED_FIFO on this platform)"
        return
    previous: dict[int, tuple[int, int]] = {}  # thread id: (policy, priority) to restore
    policy = f"SCHED_FIFO priority {REALTIME_PRIORITY}"
    try:
        for thread_id in (int(name) for name in os.listdir("/proc/self/task")):
            with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
                previous[thread_id] = (os.sched_getscheduler(thread_id), os.sched_getparam(thread_id).sched_priority)
                os.sched_setscheduler(thread_id, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
    except PermissionError:
        policy = f"normal priority ({FIFO_NOT_PERMITTED})"
    try:
        yield policy
    finally:
        # A thread started inside the block (none is expected) inherited SCHED_FIFO and keeps it.
        for thread_id, (old_policy, old_priority) in previous.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setscheduler(thread_id, old_policy, os.sched_param(old_priority))


def estimate_clock(hosts: list[str], always_estimate: bool, group: Any) -> ClockEstimate:
    """This rank's clock against rank 0's.

    Ranks on rank 0's host share its monotonic clock. Others use Cristian's algorithm: the best (shortest)
    of several ping-pongs with rank 0; the true offset lies within ±round trip / 2 of the estimate.
    """
    rank = dist.get_rank()
    remote = [r for r in range(len(hosts)) if r != 0 and (always_estimate or hosts[r] != hosts[0])]
    stamp = torch.zeros(1, dtype=torch.int64)
    if rank == 0:
        for peer in remote:
            for _ in range(CLOCK_SYNC_ROUNDS):
                dist.recv(stamp, src=peer, group=group)
                stamp[0] = time.perf_counter_ns()
                dist.send(stamp, dst=peer, group=group)
    if rank not in remote:
        return SHARED_CLOCK
    best: ClockEstimate | None = None
    for _ in range(CLOCK_SYNC_ROUNDS):
        sent = time.perf_counter_ns()
        dist.send(stamp, dst=0, group=group)
        dist.recv(stamp, src=0, group=group)
        received = time.perf_counter_ns()
        middle = (sent + received) // 2
        if best is None or received - sent < best.round_trip_ns:
            best = ClockEstimate(local_ns=middle, offset_ns=int(stamp[0]) - middle, round_trip_ns=received - sent)
    return best


def _die_with_launcher() -> None:
    parent = os.environ.get(PARENT_PID_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != int(parent):  # the launcher died before prctl took effect
        os._exit(1)


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m emuplan.measure",
        description="Time a plan's collectives with torch.distributed on this rank (run one per rank, e.g. "
        "under torchrun). Rank 0 writes the per-iteration CSV that `emuplan import` reads.",
    )
    parser.add_argument(
        "--plan",
        required=True,
        type=Path,
        action="append",
        help="plan JSON (`emuplan plan --json` or a stored plan); repeat with --output to measure several in turn",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        action="append",
        help="per-iteration CSV written by rank 0, its JSON record beside it (.json); one per --plan",
    )
    parser.add_argument("--iterations", type=int, help="measured iterations (default: the plan's trials)")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up iterations, run but not reported (default 2)")
    parser.add_argument("--workload", choices=[s.value for s in WorkloadSource], default=WorkloadSource.KCCB.value)
    parser.add_argument(
        "--backend",
        choices=["auto", "gloo", "nccl"],
        default="auto",
        help="auto: nccl when CUDA is available, else gloo",
    )
    parser.add_argument("--timeout-s", type=float, default=600.0, help="torch.distributed collective timeout")
    parser.add_argument(
        "--scheduling",
        choices=[s.value for s in TimingScheduling],
        default=TimingScheduling.REALTIME.value,
        help="realtime: time the collectives with every thread at SCHED_FIFO when allowed (root or CAP_SYS_NICE), "
        "so no thread waits for another's time slice; normal: the default scheduler (default realtime)",
    )
    parser.add_argument(
        "--clock-sync",
        choices=["auto", "always"],
        default="auto",
        help="auto: estimate clock offsets only for ranks on another host than rank 0",
    )
    args = parser.parse_args(argv)
    if len(args.plan) != len(args.output):
        parser.error(f"{len(args.plan)} --plan but {len(args.output)} --output: give one output per plan")
    return args


@dataclass(frozen=True)
class RankContext:
    """What every plan of one launch shares: the process group, the device, how to wait."""

    rank: int
    world_size: int
    backend: str
    hosts: list[str]
    device: torch.device
    control: Any  # the CPU (gloo) group for timestamps and clock pings; None: the default group
    barrier: Callable[[], None]
    wait_for_device: Callable[[], None]


def run_worker(args: argparse.Namespace) -> None:
    backend = args.backend if args.backend != "auto" else ("nccl" if torch.cuda.is_available() else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout_s))
    try:
        world_size = dist.get_world_size()
        # Timestamps and clock pings travel on the CPU even when the collectives run on GPUs.
        control = dist.new_group(backend="gloo") if backend != "gloo" else None
        hosts: list[str] = [""] * world_size
        dist.all_gather_object(hosts, socket.gethostname(), group=control)
        context = RankContext(
            rank=dist.get_rank(),
            world_size=world_size,
            backend=backend,
            hosts=hosts,
            device=device,
            control=control,
            barrier=(lambda: dist.barrier(device_ids=[local_rank])) if backend == "nccl" else dist.barrier,
            wait_for_device=torch.cuda.synchronize if device.type == "cuda" else (lambda: None),
        )
        for index, (plan_path, output) in enumerate(zip(args.plan, args.output, strict=True)):
            measure_plan(args, context, index, json.loads(plan_path.read_text()), output)
    finally:
        dist.destroy_process_group()


def measure_plan(args: argparse.Namespace, context: RankContext, index: int, document: dict, output: Path) -> None:
    """One plan: warm-up and measured iterations, then rank 0 writes ``output`` and its record."""
    rank, world_size, hosts = context.rank, context.world_size, context.hosts
    steps = measurement_steps(document, world_size, WorkloadSource(args.workload))
    iterations = args.iterations or planned_trials(document)
    always_estimate = args.clock_sync == "always"
    clock_before = estimate_clock(hosts, always_estimate, context.control)
    total = args.warmup + iterations
    if rank == 0:
        _emit(
            "started",
            plan=index,
            world_size=world_size,
            backend=context.backend,
            hosts=sorted(set(hosts)),
            iterations=iterations,
            warmup=args.warmup,
            calls_per_iteration=len(steps),
        )

    calls = prepare_calls(steps, rank, world_size, context.device)
    on_iteration = (
        (lambda done: _emit("iteration", plan=index, done=done, total=total, warmup=done <= args.warmup))
        if rank == 0
        else (lambda _done: None)
    )
    with timing_scheduling(TimingScheduling(args.scheduling)) as scheduling:
        starts, ends = time_calls(calls, total, context.barrier, context.wait_for_device, on_iteration)
    clock_after = estimate_clock(hosts, always_estimate, context.control)
    starts, ends = (to_reference_clock(stamps, clock_before, clock_after) for stamps in (starts, ends))

    gathered: list[Any] | None = [None] * world_size if rank == 0 else None
    handed = [(call.handed_input_bytes, call.handed_output_bytes) for call in calls]
    clocks = (asdict(clock_before), asdict(clock_after))
    dist.gather_object((starts, ends, clocks, handed, scheduling), gathered, dst=0, group=context.control)
    if rank == 0:
        _write_results(args, context, output, steps, iterations, gathered)
        _emit("finished", plan=index, output=str(output))


def _write_results(
    args: argparse.Namespace,
    context: RankContext,
    output: Path,
    steps: list[MeasuredCollective],
    iterations: int,
    gathered: list[Any],
) -> None:
    hosts = context.hosts
    rank_starts = np.stack([item[0] for item in gathered])
    rank_ends = np.stack([item[1] for item in gathered])
    timings = collective_timings(rank_starts, rank_ends, args.warmup)
    record = {
        "format": RECORD_FORMAT,
        "backend": context.backend,
        "world_size": len(hosts),
        "hosts": sorted(set(hosts)),
        "rank_hosts": hosts,
        "torch_version": torch.__version__,
        "workload": args.workload,
        "iterations": iterations,
        "warmup": args.warmup,
        # Per rank: the scheduling policy of its threads while the collectives were timed.
        "scheduling": [item[4] for item in gathered],
        "steps": [step.as_json() for step in steps],
        # [rank][step] = [input bytes, output bytes] of the tensors that rank handed torch.distributed.
        "handed_bytes": [item[3] for item in gathered],
        "warmup_completion_ns": timings.warmup_completion_ns.tolist(),
        # Per rank, the estimates before and after the measurement (all zero: rank 0's own clock).
        "clock": {"source": "time.perf_counter_ns (monotonic)", "estimates": [item[2] for item in gathered]},
        "rank_start_ns": rank_starts.tolist(),
        "rank_end_ns": rank_ends.tolist(),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(output.with_suffix(".json"), json.dumps(record))
    # The CSV last: its presence means the whole result is there.
    _write_atomically(output, per_iteration_csv(steps, timings))


def main(argv: list[str] | None = None) -> int:
    _die_with_launcher()
    args = parse_args(argv)
    try:
        run_worker(args)
    except MeasurementError as error:
        print(f"emuplan.measure: {error}", file=sys.stderr)
        return 2
    return 0
