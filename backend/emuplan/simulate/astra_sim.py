"""Run ASTRA-sim's analytical backend on a plan's Chakra traces and read each rank's simulated step.

The network is the plan's own: its ranks laid out as hosts × GPUs per host, every link at the plan's link speed
and α, ring collectives as its ideal times assume. The binary prints per rank "sys[r] finished, N cycles, exposed
communication M cycles" and "sys[r], GPU time: G" (cycles are ns); those lines are the result. A known upstream
defect aborts the binary at exit, after every rank's result is printed, when communicator groups are smaller
than the world and the implementation list has one entry: a non-zero exit with every rank's lines is a result
(and says so), one without them is a failure.
"""

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from emuplan.child_memory import MB, memory_limited
from emuplan.errors import EmuplanError
from emuplan.simulate.options import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S
from emuplan.workload.chakra.bundle import GROUPS_FILE, TRACE_PREFIX
from emuplan.workload.chakra.schedule import rank_ranges
from emuplan.workload.document import NormalisedInputs, PlanDocument

# How often the run is checked for progress, cancellation and its deadline.
POLL_S = 0.1
# Lines of the binary's own output quoted when it fails without results.
QUOTED_LINES = 5
INSTALL_HINT = (
    "set EMUPLAN_ASTRA_SIM to ASTRA-sim's AstraSim_Analytical_Congestion_Unaware binary "
    "(docs/simulating.md says how to build it)"
)
_FINISHED = re.compile(rb"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles")
_COMPUTE = re.compile(rb"sys\[(\d+)\], GPU time: (\d+)")


class SimulationError(ValueError):
    """The simulator failed, ran past its time, or printed no result for some rank."""


class SimulatorUnavailable(EmuplanError):
    """No ASTRA-sim binary where the setting points (or no setting): 503, with how to install it."""

    http_status = 503


class SimulationCancelled(Exception):
    pass


class NetworkDimension(BaseModel):
    topology: str = Field(description="ASTRA-sim's analytical topology of this dimension.")
    npus: int = Field(description="NPUs along this dimension (the first is innermost: consecutive ranks).")
    bandwidth_gb_s: float = Field(description="Each link's bandwidth, GB/s.")
    latency_ns: float = Field(description="Each link's latency, ns.")


class SimulatedNetwork(BaseModel):
    dimensions: list[NetworkDimension]

    def yaml_text(self) -> str:
        """ASTRA-sim's network configuration (YAML flow lists; JSON's syntax is valid YAML)."""
        fields = {
            "topology": [d.topology for d in self.dimensions],
            "npus_count": [d.npus for d in self.dimensions],
            "bandwidth": [d.bandwidth_gb_s for d in self.dimensions],
            "latency": [d.latency_ns for d in self.dimensions],
        }
        return "".join(f"{key}: {json.dumps(value)}\n" for key, value in fields.items())


def plan_network(inputs: NormalisedInputs) -> SimulatedNetwork:
    """The plan's ranks as ASTRA-sim's NPUs: GPUs within a host, then hosts (rank = host · gpus_per_host + local
    index, the order the plan numbers them), each link at the plan's per-rank link speed and latency α. A plan on
    one host, or with one GPU per host, is one ring of all its ranks."""
    # Gbit/s → GB/s of 10^9 B, the plan's unit. astra-network-analytical 599a047 (the shared build) reads a GB as
    # 2^30 B (common/NetworkFunction.cpp, bw_GBps_to_Bpns), later versions as 10^9: written as the plan says, and
    # docs/simulating.md says what that build makes of it.
    bandwidth = inputs.link_gbps / 8
    latency = inputs.latency_us * 1000
    hierarchical = inputs.hosts > 1 and inputs.gpus_per_host > 1 and inputs.hosts * inputs.gpus_per_host == inputs.gpus
    sizes = [inputs.gpus_per_host, inputs.hosts] if hierarchical else [inputs.gpus]
    return SimulatedNetwork(dimensions=[NetworkDimension(topology="Ring", npus=n, bandwidth_gb_s=bandwidth,
                                                         latency_ns=latency) for n in sizes])  # fmt: skip


# All-to-all as NCCL runs it: grouped send/recv, each rank sending 1/n of its buffer to every other rank, so (n−1)/n of
# the buffer goes through its link (ASTRA-sim's ring all-to-all moves (n−1)/2 of it per link). ASTRA-sim's "direct"
# implementation sends to every peer; "direct<w>" keeps w of those messages in flight (astra-sim/system/Sys.cc,
# ``generate_collective_impl_from_input``: the window is the number after "direct"; collective/AllToAll.cc,
# ``AllToAll::AllToAll``: ``parallel_reduce = min(window, nodes_in_ring - 1)``, all of them for -1). One at a time:
# the analytical congestion-unaware network gives each message in flight the whole link, so all at once would finish
# the n−1 messages in the time of one. tests/unit/test_simulate_all_to_all.py holds it within 3 % of a pairwise replay.
ALL_TO_ALL_IMPLEMENTATION = "direct1"


def system_config(dimensions: int) -> dict:
    """ASTRA-sim's system configuration: ring collectives in every dimension (one entry per dimension), all-to-all
    one peer at a time (``ALL_TO_ALL_IMPLEMENTATION``), and one chunk per collective, so a collective pays α once per
    ring step, as the plan's α-β ring does, not once per chunk. Compute takes each node's ``duration_micros``
    (roofline off)."""
    ring = ["ring"] * dimensions
    return {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1,
        "all-reduce-implementation": ring,
        "all-gather-implementation": ring,
        "reduce-scatter-implementation": ring,
        "all-to-all-implementation": [ALL_TO_ALL_IMPLEMENTATION] * dimensions,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1600,
        "boost-mode": 0,
        "roofline-enabled": 0,
        "peak-perf": 900,
    }


MEMORY_CONFIG = {"memory-type": "NO_MEMORY_EXPANSION"}


class RankTime(BaseModel):
    rank: int
    step_ns: int = Field(description="Simulated time from the step's start until this rank's last node ends.")
    compute_ns: int = Field(description="Time this rank's compute nodes ran.")
    exposed_comm_ns: int = Field(description="Time this rank waited on communication with no compute running.")


class SimulatorOutput(BaseModel):
    ranks: list[RankTime]
    exit_note: str | None = Field(description="Why a non-zero exit still gave a result, if it did.")
    wall_s: float = Field(description="How long the binary ran.")


class PlannedComm(BaseModel):
    parallel_dim: str
    collectives_per_step: int
    time_us: float = Field(description="Σ count per step × ideal time: the plan's α-β figure, one after another.")


def planned_communication(document: PlanDocument) -> list[PlannedComm]:
    """The plan's communication per step by parallel dimension, as its ideal times add up."""
    totals: dict[str, tuple[int, float]] = {}
    for item in document.collectives:
        count, time_us = totals.get(item.parallel_dim.value, (0, 0.0))
        totals[item.parallel_dim.value] = (
            count + item.count_per_step,
            time_us + item.count_per_step * item.ideal_time_us,
        )
    return [PlannedComm(parallel_dim=dim, collectives_per_step=n, time_us=t) for dim, (n, t) in totals.items()]


def check_binary(binary: Path | None) -> Path:
    if binary is None:
        raise SimulatorUnavailable(f"ASTRA-sim is not set up on this machine: {INSTALL_HINT}")
    if not binary.is_file():
        raise SimulatorUnavailable(f"EMUPLAN_ASTRA_SIM: no file at {binary}; {INSTALL_HINT}")
    return binary


def _read_results(output: bytes) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """rank → (step, exposed communication) and rank → compute, in ns, from the binary's output."""
    finished = {int(r): (int(step), int(exposed)) for r, step, exposed in _FINISHED.findall(output)}
    compute = {int(r): int(ns) for r, ns in _COMPUTE.findall(output)}
    return finished, compute


def _last_lines(path: Path) -> str:
    lines = path.read_bytes()[-8192:].decode(errors="replace").strip().splitlines()
    return " | ".join(lines[-QUOTED_LINES:]) or "(nothing)"


def run_astra_sim(
    binary: Path,
    files: Mapping[str, bytes],
    network: SimulatedNetwork,
    world_size: int,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_bytes: int = DEFAULT_MEMORY_MB * MB,
    cancel: threading.Event | None = None,
    on_started: Callable[[], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> SimulatorOutput:
    """Simulate ``files`` (a Chakra bundle: ``workload.<rank>.et`` for every rank and ``comm_groups.json``) on
    ``network`` in a temporary folder; ``on_started`` is called once the traces are written and the binary runs,
    ``on_progress`` with the count of ranks finished as they finish. ``cancel`` (``SimulationCancelled``) and
    ``timeout_s`` (``SimulationError``) stop the writing of the traces too, which a bundle encodes as it is read:
    thousands of ranks take minutes. The binary runs under ``memory_limit_bytes`` (``child_memory``)."""
    npus = math.prod(dimension.npus for dimension in network.dimensions)
    if not network.dimensions or npus != world_size:
        raise SimulationError(f"network: {npus} NPUs for a plan of {world_size} ranks")
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(prefix="emuplan-astra-sim-") as folder:
        root = Path(folder)
        traces = root / "traces"
        traces.mkdir()
        for name, content in files.items():
            if cancel is not None and cancel.is_set():
                raise SimulationCancelled("cancelled before ASTRA-sim started")
            if time.monotonic() > deadline:
                raise SimulationError(
                    f"timeout_s: writing the plan's traces ran past {timeout_s:g} s; ASTRA-sim was not started"
                )
            (traces / name).write_bytes(content)
        (root / "system.json").write_text(json.dumps(system_config(len(network.dimensions))))
        (root / "network.yml").write_text(network.yaml_text())
        (root / "memory.json").write_text(json.dumps(MEMORY_CONFIG))
        command = [
            str(binary),
            f"--workload-configuration={traces / TRACE_PREFIX}",
            f"--comm-group-configuration={traces / GROUPS_FILE}",
            f"--system-configuration={root / 'system.json'}",
            f"--network-configuration={root / 'network.yml'}",
            f"--remote-memory-configuration={root / 'memory.json'}",
        ]
        stdout_path, stderr_path = root / "stdout.txt", root / "stderr.txt"
        started = time.monotonic()
        with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
            try:
                # Its own session, so a kill takes anything it started too; it writes log/ into its folder.
                process = subprocess.Popen(
                    memory_limited(command, memory_limit_bytes),
                    cwd=root,
                    stdout=stdout,
                    stderr=stderr,
                    start_new_session=True,
                )
            except OSError as error:
                raise SimulatorUnavailable(f"EMUPLAN_ASTRA_SIM: cannot run {binary}: {error}") from None
            if on_started is not None:
                on_started()
            _wait(process, stdout_path, world_size, deadline, timeout_s, cancel, on_progress)
        wall_s = time.monotonic() - started
        finished, compute = _read_results(stdout_path.read_bytes())
        missing = [rank for rank in range(world_size) if rank not in finished or rank not in compute]
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (", …" if len(missing) > 8 else "")
            ran_out = b"bad_alloc" in stderr_path.read_bytes()[-8192:]
            raise SimulationError(
                (
                    f"ASTRA-sim ran out of its memory limit of {memory_limit_bytes / MB:,.0f} MB "
                    "(EMUPLAN_SIMULATOR_MEMORY_MB): "
                    if ran_out
                    else ""
                )
                + f"ASTRA-sim exited with status {process.returncode} without a result for rank(s) {shown} "
                f"({len(missing)} of {world_size}); its last words: {_last_lines(stderr_path)} || "
                f"{_last_lines(stdout_path)}"
            )
    exit_note = None
    if process.returncode != 0:
        exit_note = (
            f"ASTRA-sim exited with status {process.returncode} after printing every rank's result: its known "
            "abort at exit with communicator groups smaller than the world (the results are complete)"
        )
    ranks = [
        RankTime(rank=r, step_ns=finished[r][0], compute_ns=compute[r], exposed_comm_ns=finished[r][1])
        for r in range(world_size)
    ]
    return SimulatorOutput(ranks=ranks, exit_note=exit_note, wall_s=wall_s)


def _wait(
    process: subprocess.Popen,
    stdout_path: Path,
    world_size: int,
    deadline: float,
    timeout_s: float,
    cancel: threading.Event | None,
    on_progress: Callable[[int], None] | None,
) -> None:
    """Until the binary exits: report ranks finished; kill it on cancel, past the deadline, or when the caller is
    interrupted (Ctrl-C in the CLI: the binary runs in its own session, so the terminal's signal misses it)."""
    follower = _FinishedLines(stdout_path)
    reported = -1
    try:
        while True:
            # A cancel wins even over a run that has just ended: whoever cancelled wants no result.
            if cancel is not None and cancel.is_set():
                raise SimulationCancelled("cancelled: ASTRA-sim was stopped")
            exited = process.poll() is not None
            if on_progress is not None and (done := follower.count()) != reported:
                on_progress(min(done, world_size))
                reported = done
            if exited:
                return
            if time.monotonic() > deadline:
                raise SimulationError(f"timeout_s: ASTRA-sim ran past {timeout_s:g} s and was stopped")
            time.sleep(POLL_S)
    except BaseException:
        _kill(process)
        raise


class _FinishedLines:
    """Counts the "sys[r] finished" lines of a growing output file, reading each byte once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.finished = 0

    def count(self) -> int:
        with self.path.open("rb") as output:
            output.seek(self.offset)
            chunk = output.read()
        self.offset += len(chunk)
        complete, _, self.partial = (self.partial + chunk).rpartition(b"\n")
        self.finished += len(_FINISHED.findall(complete))
        return self.finished


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# A rank group's ranges as a table shows them: a pipeline stage of 1,024 ranks is 16 ranges, of 16,384 ranks 128.
SHOWN_RANGES = 3


class RankGroup(BaseModel):
    """Ranks whose simulated figures are the same (ranks sharing a role usually are), written once."""

    ranks: str = Field(description="The ranks, as ranges: '0-1, 4-5'.")
    ranks_shown: str = Field(description="The ranks for a table: the first three ranges, '…' and the last one.")
    count: int
    step_ns: int
    compute_ns: int
    exposed_comm_ns: int


def rank_groups(ranks: list[RankTime]) -> list[RankGroup]:
    """Ranks with the same figures together, the slowest step first."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for rank in ranks:
        groups.setdefault((rank.step_ns, rank.compute_ns, rank.exposed_comm_ns), []).append(rank.rank)
    ordered = sorted(groups.items(), key=lambda item: (-item[0][0], item[1][0]))
    return [
        RankGroup(ranks=rank_ranges(members), ranks_shown=shown_ranks(members), count=len(members), step_ns=step,
                  compute_ns=compute, exposed_comm_ns=exposed)
        for (step, compute, exposed), members in ordered
    ]  # fmt: skip


def shown_ranks(members: list[int]) -> str:
    """[0, 1, 4, 5, 8, 9, 12, 13, 16, 17] → '0-1, 4-5, 8-9, …, 16-17'."""
    ranges = rank_ranges(members).split(", ")
    if len(ranges) <= SHOWN_RANGES + 1:
        return ", ".join(ranges)
    return ", ".join([*ranges[:SHOWN_RANGES], "…", ranges[-1]])


class Simulation(BaseModel):
    """A plan's training step as ASTRA-sim simulated it, beside the communication the plan itself puts in it."""

    gpu: str = Field(description="The GPU whose peak times the traces' compute.")
    utilisation: float
    network: SimulatedNetwork
    step_ns: int = Field(description="The slowest rank's simulated step.")
    ranks: list[RankTime]
    rank_groups: list[RankGroup] = Field(description="Ranks with the same figures together, the slowest first.")
    planned_comm: list[PlannedComm] = Field(description="The plan's ideal communication per step, by dimension.")
    exit_note: str | None
    wall_s: float


def simulate_plan(
    binary: Path,
    document: PlanDocument,
    files: Mapping[str, bytes],
    gpu: str,
    utilisation: float,
    **run_options,
) -> Simulation:
    """``files``, the plan's Chakra bundle for every rank, simulated on the plan's network (``run_astra_sim``)."""
    network = plan_network(document.inputs)
    output = run_astra_sim(binary, files, network, document.inputs.gpus, **run_options)
    return Simulation(
        gpu=gpu,
        utilisation=utilisation,
        network=network,
        step_ns=max(rank.step_ns for rank in output.ranks),
        ranks=output.ranks,
        rank_groups=rank_groups(output.ranks),
        planned_comm=planned_communication(document),
        exit_note=output.exit_note,
        wall_s=output.wall_s,
    )
