"""Real measurements on local gloo processes: buffer sizes, timing arithmetic, failures, no orphans."""

import csv
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emuplan.measure.launcher import LocalLauncher, MeasurementCancelled
from emuplan.measure.options import MeasurementOptions, WorkloadSource
from emuplan.measure.torchrun import torchrun_command
from emuplan.measure.workload import MeasurementError
from ports import free_port

EVERY_OP_PLAN = {
    "trials": 3,
    "kccb": {"collective": "all_reduce", "data_sizes": [4096], "iterations": 3},
    "collectives": [
        {"op": "all_reduce", "bytes_total": 4096, "dtype": "float32", "count_per_step": 2, "label": "bucket 0"},
        {"op": "all_gather", "bytes_total": 8192, "bytes_per_rank": 2048, "dtype": "float32", "label": "params"},
        {"op": "reduce_scatter", "bytes_total": 8192, "bytes_per_rank": 2048, "dtype": "bfloat16", "label": "grads"},
        {"op": "broadcast", "bytes_total": 1001, "dtype": "float32", "label": "odd bytes"},
        {"op": "reduce", "bytes_total": 512, "dtype": "float32", "label": "loss"},
        {"op": "all_to_all", "bytes_total": 4096, "dtype": "float16", "label": "experts"},
        {
            "op": "send_recv",
            "bytes_total": 2048,
            "dtype": "float32",
            "phase": "forward",
            "label": "stage 1 → 2 activation",
        },
        {
            "op": "send_recv",
            "bytes_total": 2048,
            "dtype": "float32",
            "phase": "backward",
            "label": "stage 3 → 2 activation gradient",
        },
    ],
}
OPS = [
    "all_reduce",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "send_recv",
    "send_recv",
]
# What every rank hands torch.distributed at 4 ranks, per the nccl-tests convention: [input, output] bytes.
SYMMETRIC = [[4096, 4096], [4096, 4096], [2048, 8192], [8192, 2048], [1001, 1001], [512, 512], [4096, 4096]]
EXPECTED_HANDED_BYTES = [
    SYMMETRIC + [[0, 0], [0, 0]],
    SYMMETRIC + [[2048, 0], [0, 0]],  # stage 1 sends its activation to stage 2
    SYMMETRIC + [[0, 2048], [0, 2048]],  # stage 2 receives it, and the gradient from stage 3
    SYMMETRIC + [[0, 0], [2048, 0]],
]
BROADCAST_PLAN = {"trials": 5, "collectives": [{"op": "broadcast", "bytes_total": 12, "label": "flags"}]}
LONG_PLAN = {"trials": 100000, "kccb": {"collective": "all_reduce", "data_sizes": [64], "iterations": 100000}}


def is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def measure_workers_of_this_process() -> list[int]:
    """Any process whose parent is this test process and which runs the measurement worker."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if parent == os.getpid() and b"emuplan.measure" in command:
            pids.append(int(entry.name))
    return pids


def assert_no_worker_left(launcher: LocalLauncher) -> None:
    assert len(launcher.worker_pids) == launcher.options.world_size
    assert [pid for pid in launcher.worker_pids if is_running(pid)] == []
    assert measure_workers_of_this_process() == []


def test_every_op_hands_the_planned_bytes_and_completion_is_max_end_minus_min_start() -> None:
    events = []
    options = MeasurementOptions(
        world_size=4, backend="gloo", iterations=2, warmup=1, workload=WorkloadSource.COLLECTIVES, timeout_s=120
    )
    # Two plans on the same processes, one after the other.
    launcher = LocalLauncher([EVERY_OP_PLAN, BROADCAST_PLAN], options, events.append)
    result, second = launcher.run()
    record = result.record

    assert [step["op"] for step in record["steps"]] == OPS
    assert record["handed_bytes"] == EXPECTED_HANDED_BYTES
    assert [step["dtype"] for step in record["steps"]] == [
        "float32",
        "float32",
        "float32",
        "bfloat16",
        "uint8",
        "float32",
        "float16",
        "float32",
        "float32",
    ]
    assert (record["backend"], record["world_size"], record["iterations"], record["warmup"]) == ("gloo", 4, 2, 1)
    # One host: every rank reads rank 0's monotonic clock, nothing to estimate.
    shared = {"local_ns": 0, "offset_ns": 0, "round_trip_ns": 0}
    assert record["clock"]["estimates"] == [[shared, shared]] * 4

    starts = np.array(record["rank_start_ns"])
    ends = np.array(record["rank_end_ns"])
    assert starts.shape == (4, 3, 9)  # ranks × (warm-up + measured iterations) × calls
    completion = ends.max(axis=0) - starts.min(axis=0)
    assert record["warmup_completion_ns"] == completion[:1].tolist()

    rows = list(csv.DictReader(io.StringIO(result.csv_text)))
    assert len(rows) == 2 * 9  # warm-up iteration excluded
    assert [int(row["iteration"]) for row in rows] == [0] * 9 + [1] * 9
    assert [row["collective"] for row in rows[:9]] == OPS
    assert [int(row["size_bytes"]) for row in rows[:9]] == [4096, 4096, 8192, 8192, 1001, 512, 4096, 2048, 2048]
    assert [row["label"] for row in rows[:3]] == ["bucket 0", "bucket 0", "params"]
    assert [row["duration_us"] for row in rows] == [f"{value / 1000:.3f}" for value in completion[1:].ravel()]

    assert [(event["event"], event.get("plan")) for event in events] == [
        ("launching", None),
        *[("started", 0), ("iteration", 0), ("iteration", 0), ("iteration", 0), ("finished", 0)],
        *[("started", 1), ("iteration", 1), ("iteration", 1), ("iteration", 1), ("finished", 1)],
    ]
    assert second.record["handed_bytes"] == [[[12, 12]]] * 4
    assert [line.split(",")[1:3] for line in second.csv_text.splitlines()[1:]] == [["broadcast", "12"]] * 2
    assert [event["warmup"] for event in events if event["event"] == "iteration"] == [True, False, False] * 2
    assert_no_worker_left(launcher)


def interrupt_second_rank_on_first_iteration(action):
    holder = {}

    def on_event(event):
        if event["event"] == "iteration" and event["done"] == 1:
            action(holder["launcher"])

    return holder, on_event


def test_crashed_worker_ends_the_measurement_with_an_error_and_kills_the_rest() -> None:
    holder, on_event = interrupt_second_rank_on_first_iteration(
        lambda launcher: os.kill(launcher.worker_pids[1], signal.SIGKILL)
    )
    launcher = holder["launcher"] = LocalLauncher([LONG_PLAN], MeasurementOptions(world_size=3, warmup=0), on_event)
    with pytest.raises(MeasurementError, match="measurement failed: .*rank 1 was killed by SIGKILL"):
        launcher.run()
    assert_no_worker_left(launcher)


def test_hung_worker_times_out_and_every_worker_is_killed() -> None:
    holder, on_event = interrupt_second_rank_on_first_iteration(
        lambda launcher: os.kill(launcher.worker_pids[1], signal.SIGSTOP)
    )
    options = MeasurementOptions(world_size=2, warmup=0, timeout_s=8)
    launcher = holder["launcher"] = LocalLauncher([LONG_PLAN], options, on_event)
    with pytest.raises(MeasurementError, match=r"measurement timed out after 8 s; rank\(s\) 0, 1 still running"):
        launcher.run()
    assert_no_worker_left(launcher)


def test_cancel_kills_the_workers() -> None:
    holder, on_event = interrupt_second_rank_on_first_iteration(lambda launcher: launcher.cancel())
    launcher = holder["launcher"] = LocalLauncher([LONG_PLAN], MeasurementOptions(world_size=2, warmup=0), on_event)
    with pytest.raises(MeasurementCancelled, match="the measurement was cancelled"):
        launcher.run()
    assert_no_worker_left(launcher)


def test_plans_too_large_for_this_machine_are_refused_before_any_process_starts() -> None:
    huge = {"trials": 1, "kccb": {"collective": "all_reduce", "data_sizes": [2**45], "iterations": 1}}
    with pytest.raises(MeasurementError, match="measure this plan on a cluster with --torchrun"):
        LocalLauncher([huge], MeasurementOptions(world_size=4))


def test_printed_torchrun_command_runs_the_worker_and_estimates_clock_offsets(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(EVERY_OP_PLAN))
    options = MeasurementOptions(backend="gloo", iterations=2, warmup=1)
    command = torchrun_command(
        str(plan_file),
        str(tmp_path / "out.csv"),
        options,
        nnodes=1,
        nproc_per_node=2,
        rendezvous=f"127.0.0.1:{free_port()}",
    )
    command[0] = str(Path(sys.executable).parent / "torchrun")
    # Treat rank 1 as if on another host so the offset estimate runs; on one host the truth is 0.
    completed = subprocess.run([*command, "--clock-sync", "always"], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]

    record = json.loads((tmp_path / "out.json").read_text())
    for estimate in record["clock"]["estimates"][1]:  # before and after the measurement
        assert estimate["round_trip_ns"] > 0
        assert abs(estimate["offset_ns"]) <= estimate["round_trip_ns"] / 2 + 1  # Cristian's bound, ±1 ns rounding
    rows = list(csv.DictReader((tmp_path / "out.csv").open()))
    assert [(row["iteration"], row["collective"], row["size_bytes"]) for row in rows[:2]] == [
        ("0", "all_reduce", "4096"),
        ("1", "all_reduce", "4096"),
    ]
    assert len(rows) == 2  # the KCCB view: one all-reduce per iteration
