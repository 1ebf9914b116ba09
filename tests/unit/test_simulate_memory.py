"""ASTRA-sim bounded in memory as in time (issue 42): a plan whose estimated simulator memory passes the limit is
refused before anything starts, naming the estimate; one that starts runs under the limit (RLIMIT_DATA), and
running out of it is said so; the measurement workers run under theirs."""

import pytest

from astra_sim_binary import requires_astra_sim
from emuplan.measure.launcher import LocalLauncher
from emuplan.measure.options import MeasurementOptions
from emuplan.simulate.astra_sim import SimulationError, plan_network, run_astra_sim
from emuplan.simulate.memory import SimulationTooLarge, check_memory, estimated_bytes
from emuplan.workload.chakra.bundle import bundle_files
from emuplan.workload.chakra.schedule import ComputeModel, build_traces
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model
from paths import ASTRA_SIM

MB = 1024**2


def traces_of(model: str, **request):
    inventory = resolve_model(model)
    document = plan_workload(PlanRequest(model=model, mode="framework", **request), inventory)
    return document, build_traces(document, inventory, ComputeModel.from_options())


def test_the_audit_s_70b_plan_on_16384_ranks_is_refused_with_its_estimate() -> None:
    _, traces = traces_of("llama-3-70b", strategy="hybrid", tp=8, pp=16, dp=128)
    # 1,024 ranks a stage; stage 0 runs 475 nodes, the last 500, the 14 between 459 each.
    nodes = 1024 * (475 + 14 * 459 + 500)
    assert nodes == 7_578_624
    assert estimated_bytes({s: len(n) for s, n in traces.stage_nodes.items()}, dict.fromkeys(range(16), 1024)) == (
        16 * MB + 1_600 * nodes + 500 * 16384**2
    )
    with pytest.raises(SimulationTooLarge) as refused:
        check_memory(traces, 4096 * MB)
    assert str(refused.value) == (
        "gpus: ASTRA-sim would need about 139,580 MB for this plan (16,384 ranks, 7,578,624 trace nodes in all; "
        "its memory grows with the nodes and the square of the ranks), more than its limit of 4,096 MB "
        "(EMUPLAN_SIMULATOR_MEMORY_MB); simulate a plan of fewer ranks"
    )


def test_a_plan_under_the_limit_passes_with_its_estimate() -> None:
    _, traces = traces_of("fashion-mnist-mlp", strategy="data", gpus=4)
    assert check_memory(traces, 4096 * MB) == 16 * MB + 1_600 * 4 * 14 + 500 * 16


@requires_astra_sim
def test_a_simulation_past_its_memory_limit_is_stopped_and_says_so() -> None:
    # 256 ranks on one ring: ~41 MB at its peak (memory.py's table); here it may write 24 MB.
    document, traces = traces_of("fashion-mnist-mlp", strategy="data", gpus=256)
    files = bundle_files(document, traces, "a test plan")
    with pytest.raises(SimulationError) as stopped:
        run_astra_sim(ASTRA_SIM, files, plan_network(document.inputs), 256, memory_limit_bytes=24 * MB)
    message = str(stopped.value)
    assert message.startswith(
        "ASTRA-sim ran out of its memory limit of 24 MB (EMUPLAN_SIMULATOR_MEMORY_MB): ASTRA-sim exited with "
        "status -6 without a result for rank(s) 0, 1, 2, 3, 4, 5, 6, 7, … (256 of 256); its last words: "
    )
    assert "std::bad_alloc" in message


def test_measurement_workers_run_under_their_memory_limit() -> None:
    plan = {"trials": 1, "kccb": {"collective": "all_reduce", "data_sizes": [1024], "iterations": 1}}
    options = MeasurementOptions(world_size=2, backend="gloo", warmup=0, timeout_s=120, memory_mb=3000)
    limits: list[str] = []

    def on_event(event: dict) -> None:
        if event.get("event") == "started" and not limits:
            for pid in launcher.worker_pids:
                with open(f"/proc/{pid}/limits") as table:
                    limits.extend(line.split()[3:5] for line in table if line.startswith("Max data size"))

    launcher = LocalLauncher([plan], options, on_event)
    launcher.run()
    assert limits == [[str(3000 * MB)] * 2] * 2
