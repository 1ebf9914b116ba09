"""PyTorch profiler traces of real DDP and FSDP2 steps (2 gloo CPU ranks, tests/profiled_ddp.py) read as observed
runs, and held against the framework-mode data-parallel plans of the same model: they agree exactly. A trace
of the NCCL backend is the real FSDP2 trace rewritten only where PyTorch's source says NCCL's differs
(``as_nccl_trace``): no GPU here, and the calls, sizes and times are the real ones."""

import json
from collections import defaultdict
from math import prod
from pathlib import Path

import pytest

from emuplan.results import ResultFileError, parse_result_file
from emuplan.results.analysis.plan_vs_observed import compare_plan_with_observed
from emuplan.results.budget import ImportBudget
from emuplan.results.formats.observed import parse_observed
from profiled_ddp import ThreeLayers, ddp_plan, profiled_fsdp2_steps, three_layers_input


def parsed_job(files):
    """``parse_observed`` within a budget of the default limits, released afterwards as an import's is."""
    with ImportBudget() as budget:
        return parse_observed(files, budget=budget)


def named(paths: list[Path]) -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in paths]


BUCKETS = [4239400, 2109440]  # DDP's 1 MiB first bucket (last layer + middle), then the rest
BROADCASTS = [8192, 8]  # the batch norm's running mean and variance, then num_batches_tracked (int64)


def test_two_ranks_traces_are_one_observed_run(traces: list[Path]) -> None:
    parsed = parsed_job(named(traces))
    assert (parsed.source_format, parsed.ranks, parsed.hosts, parsed.warnings) == ("pytorch-profiler", 2, 1, [])
    # Per step: DDP broadcasts the buffers before forward, then all-reduces the buckets in backward. Calls are in
    # the order they started; DDP issues both broadcasts at once and gloo's two worker threads run them
    # together, so which of the two started first varies from run to run (a bucket waits for its gradients).
    calls = [
        (row["collective"], row["size_bytes"])
        for row in parsed.samples.select(["collective", "size_bytes"]).to_pylist()
    ]
    broadcasts = {("broadcast", size) for size in BROADCASTS}
    all_reduces = [("all_reduce", BUCKETS[0]), ("all_reduce", BUCKETS[1])]
    assert [(set(calls[i : i + 2]), calls[i + 2 : i + 4]) for i in (0, 4)] == [(broadcasts, all_reduces)] * 2
    step = sorted(broadcasts, reverse=True) + all_reduces
    assert set(parsed.samples["variant"].to_pylist()) == {"pg 0 (default_pg)"}
    # Every call timed on both ranks; the sample is the slower one.
    rank_times = parsed.rank_times.to_pylist()
    assert len(rank_times) == 16 and {row["rank"] for row in rank_times} == {"0", "1"}
    for sample, duration in enumerate(parsed.samples["duration_us"].to_pylist()):
        assert duration == max(row["duration_us"] for row in rank_times if row["sample"] == sample)
    assert parsed.elements == {
        ("broadcast", 8192): (2048, "float"),
        ("broadcast", 8): (1, "int64"),
        ("all_reduce", 4239400): (1059850, "float"),
        ("all_reduce", 2109440): (527360, "float"),
    }
    group = {"communicator": "pg 0 (default_pg)", "group_size": 2, "calls": 2, "calls_in_steps": 2}
    timing = ("mean_us", "busbw_gbps", "reported_busbw_gbps")
    assert {
        **parsed.observed,
        "groups": sorted(
            ({k: v for k, v in g.items() if k not in timing} for g in parsed.observed["groups"]),
            key=lambda g: (g["collective"] == "all_reduce", -g["size_bytes"]),
        ),
    } == {
        "steps": [2, 3],
        "communicators": [{"id": "pg 0 (default_pg)", "size": 2, "ranks": ["0", "1"], "hosts": ["vm"]}],
        "groups": [{"collective": op, "size_bytes": size, **group} for op, size in step],
    }
    # Each group's time is the mean of its calls' (slowest-rank) times; busbw ours, the trace states none.
    durations = parsed.samples["duration_us"].to_pylist()
    for group in parsed.observed["groups"]:
        times = [
            d for d, call in zip(durations, calls, strict=True) if call == (group["collective"], group["size_bytes"])
        ]
        assert group["mean_us"] == pytest.approx(sum(times) / 2, rel=1e-12) and len(times) == 2
        factor = 1.0 if group["collective"] == "broadcast" else 2 * (2 - 1) / 2
        assert group["busbw_gbps"] == pytest.approx(group["size_bytes"] / (group["mean_us"] * 1e3) * factor, rel=1e-12)
        assert group["reported_busbw_gbps"] is None


def test_the_plan_of_the_same_model_is_what_ddp_sent(traces: list[Path]) -> None:
    parsed = parsed_job(named(traces))
    comparison = compare_plan_with_observed(ddp_plan(), parsed.observed)
    assert comparison["counts"] == {"matched": 4, "count differs": 0, "size differs": 0, "missing": 0, "unexpected": 0}
    assert [(r["collective"], r["planned_size_bytes"], r["observed_size_bytes"]) for r in comparison["rows"]] == [
        ("all_reduce", 2109440, 2109440), ("all_reduce", 4239400, 4239400),
        ("broadcast", 8, 8), ("broadcast", 8192, 8192),
    ]  # fmt: skip
    assert {(r["planned_per_step"], r["observed_per_step"], r["group_size"]) for r in comparison["rows"]} == {(1, 1, 2)}
    total = sum(BUCKETS) + sum(BROADCASTS)
    assert (comparison["steps"], comparison["planned_bytes_per_step"], comparison["observed_bytes_per_step"]) == (
        2,
        total,
        total,
    )
    assert comparison["predicted_pct"] == 100.0
    assert comparison["summary"] == "plan predicted 100 % of the bytes per step"


def test_a_plan_with_another_bucket_cap_is_told_apart(traces: list[Path]) -> None:
    # At 8 MiB the plan puts every gradient in one bucket; DDP's default first bucket makes two.
    comparison = compare_plan_with_observed(ddp_plan(bucket_cap_mb=8), parsed_job(named(traces)).observed)
    statuses = [
        (r["status"], r["collective"], r["planned_size_bytes"], r["observed_size_bytes"]) for r in comparison["rows"]
    ]
    assert statuses == [
        ("matched", "broadcast", 8, 8),
        ("matched", "broadcast", 8192, 8192),
        ("size differs", "all_reduce", 6348840, 2109440),
        ("unexpected", "all_reduce", None, 4239400),
    ]
    assert comparison["planned_bytes_per_step"] == 8 + 8192 + 6348840
    assert comparison["observed_bytes_per_step"] == 8 + 8192 + 2109440 + 4239400
    assert comparison["predicted_pct"] == pytest.approx(8200 / 6357040 * 100, rel=1e-12)
    assert comparison["summary"] == (
        "plan predicted 0 % of the bytes per step; all-reduce of 2.01172 MiB where the plan has 6.05473 MiB; "
        "1 unexpected all-reduce of 4.04301 MiB"
    )


def event_index(content: bytes, name: str) -> int:
    return next(i for i, e in enumerate(json.loads(content)["traceEvents"]) if e.get("name") == name)


def test_a_trace_cut_short_is_refused_with_its_event(traces: list[Path]) -> None:
    content = traces[0].read_bytes()
    cut = content.index(b'"ProfilerStep#3"') + 5  # inside the step's event
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(content[:cut], "rank0.json")
    message = str(refused.value)
    assert message.startswith(f"rank0.json: traceEvents[{event_index(content, 'ProfilerStep#3')}], line "), message
    assert message.endswith("(the trace is cut short)"), message


def test_a_broken_event_is_refused_with_its_index(traces: list[Path]) -> None:
    content = traces[0].read_bytes()
    broken = content.replace(b'"ProfilerStep#3"', b'ProfilerStep#3"')
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(broken, "rank0.json")
    message = str(refused.value)
    assert message.startswith(f"rank0.json: traceEvents[{event_index(content, 'ProfilerStep#3')}], line "), message
    assert message.endswith("not valid JSON: Expecting value"), message


# --- FSDP2 ---------------------------------------------------------------------------------------------------------

# The plan's units, whole buffers of float32 parameters by size: body.1 (BatchNorm1d), body.5 (Linear 1024→10),
# body.0 (Linear 512→1024), body.3 (Linear 1024→1024).
UNITS = [8192, 41000, 2101248, 4198400]
LOSS = 4  # the 0-dim float32 loss, all-reduced over the metrics group once per step
ONE_GROUP = "gloo (process group not recorded)"


@pytest.fixture(scope="module")
def fsdp2_traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return profiled_fsdp2_steps(ThreeLayers, three_layers_input, tmp_path_factory.mktemp("fsdp2"))


def untimed(groups: list[dict]) -> list[dict]:
    timing = ("mean_us", "busbw_gbps", "reported_busbw_gbps")
    return sorted(({k: v for k, v in g.items() if k not in timing} for g in groups), key=by_size)


def by_size(group: dict) -> tuple[int, str]:
    return group["size_bytes"], group["collective"]


def test_fsdp2_traces_hold_its_gathers_and_the_scatters_gloo_runs_as_all_reduces(fsdp2_traces: list[Path]) -> None:
    parsed = parsed_job(named(fsdp2_traces))
    assert (parsed.ranks, parsed.hosts) == (2, 1)
    assert parsed.warnings == [
        f"rank{rank}.json: 2 process groups, and gloo's events do not say which ran a call: their calls are counted "
        "together"
        for rank in (0, 1)
    ]
    # Per step each unit is gathered before its forward and again before its backward, and its gradients
    # reduce-scattered: gloo ran those as all-reduces of the whole gradient (gloo:all_reduce), and the calling
    # thread's c10d::_reduce_scatter_base_ says what was asked. An all-gather's gloo input is one rank's half.
    calls = {"group_size": 2, "communicator": ONE_GROUP}
    assert untimed(parsed.observed["groups"]) == sorted(
        [{"collective": "all_gather", "size_bytes": size, **calls, "calls": 4, "calls_in_steps": 4} for size in UNITS]
        + [
            {"collective": "reduce_scatter", "size_bytes": size, **calls, "calls": 2, "calls_in_steps": 2}
            for size in UNITS
        ]
        + [{"collective": "all_reduce", "size_bytes": LOSS, **calls, "calls": 2, "calls_in_steps": 2}],
        key=by_size,
    )
    assert parsed.elements == {
        **{(op, size): (size // 4, "float") for op in ("all_gather", "reduce_scatter") for size in UNITS},
        ("all_reduce", LOSS): (1, "float"),
    }
    assert parsed.observed["communicators"] == [{"id": ONE_GROUP, "size": 2, "ranks": ["0", "1"], "hosts": ["vm"]}]


def test_the_fsdp2_plan_of_the_same_model_is_what_fsdp2_sent(fsdp2_traces: list[Path]) -> None:
    comparison = compare_plan_with_observed(ddp_plan(dp_impl="fsdp2"), parsed_job(named(fsdp2_traces)).observed)
    rows = [
        (r["status"], r["collective"], r["planned_size_bytes"], r["observed_size_bytes"], r["planned_per_step"],
         r["observed_per_step"], r["group_size"])
        for r in comparison["rows"]
    ]  # fmt: skip
    assert rows == [("matched", "all_gather", size, size, 2, 2, 2) for size in UNITS] + [
        ("matched", "reduce_scatter", size, size, 1, 1, 2) for size in UNITS
    ] + [("unexpected", "all_reduce", None, LOSS, 0, 1, 2)]
    planned = 3 * sum(UNITS)
    assert (comparison["planned_bytes_per_step"], comparison["observed_bytes_per_step"]) == (planned, planned + LOSS)
    assert comparison["predicted_pct"] == pytest.approx(planned / (planned + LOSS) * 100, rel=1e-12)
    assert comparison["summary"] == "plan predicted 100 % of the bytes per step; 1 unexpected all-reduce of 4 B"


# --- The NCCL backend ----------------------------------------------------------------------------------------------

# For each c10d op the FSDP2 job calls: the collective name ProcessGroupNCCL records for it (RECORD_PARAM_COMMS_DATA),
# its profiling title, and the gloo op that ran it here (paired by order and elements).
NCCL_OF_C10D = {
    "c10d::_allgather_base_": ("_allgather_base", "nccl:_all_gather_base", "gloo:all_gather"),
    "c10d::_reduce_scatter_base_": ("_reduce_scatter_base", "nccl:_reduce_scatter_base", "gloo:all_reduce"),
    "c10d::allreduce_": ("allreduce", "nccl:all_reduce", "gloo:all_reduce"),
}
C10_DTYPE = {"float": "Float"}  # the profiler's C++ type name → c10::toString(ScalarType)
GROUPS = {"0": "default_pg", "1": "metrics"}


def element_counts(event: dict) -> tuple[int, int]:
    """(In msg nelems, Out msg nelems) as ProcessGroupNCCL states them for this c10d op."""
    dims = event["args"]["Input Dims"]
    if event["name"] == "c10d::allreduce_":
        return prod(dims[0][0]), prod(dims[0][0])
    return prod(dims[1]), prod(dims[0])  # (output, input, …)


def as_nccl_trace(document: dict, *, kernels: bool = True) -> dict:
    """The trace of the same calls had the job run on NCCL, rewritten only where PyTorch's source says NCCL's trace
    differs from gloo's:

    - ProcessGroupNCCL records each c10d call with ``RECORD_PARAM_COMMS_DATA`` inside the c10d op, on the calling
      thread: a ``record_param_comms`` event with the args ``saveNcclMeta`` writes (torch/csrc/profiler/util.cpp:
      "Collective name", "dtype" as c10 names it, "In/Out msg nelems", "In/Out split size", "Group size", "Process
      Group Name/Description/Ranks", "Rank", "Seq") and its profiling title (``nccl:_all_gather_base`` …) in place
      of gloo's worker-thread event. The metrics all-reduce (the 0-dim loss) is the job's call on group 1; the
      rest are FSDP2's, on the default group. Seq counts each group's calls from 1, in the order they were issued.
    - The work gloo's event timed runs as an NCCL kernel on the device: same start and duration, its "External id"
      the record_param_comms event's, with the collective's fields Kineto copies onto it (libkineto
      output_json.cpp). ``kernels=False`` leaves them out, as a CPU-only profile of an NCCL job would.
    - ``distributedInfo``: backend ``nccl``, each group's ``backend_config`` ``cuda:nccl``, an ``nccl_version``
      (torch/profiler/profiler.py, ``_get_distributed_info``).
    """
    events = document["traceEvents"]
    ops = sorted((e for e in events if e.get("name") in NCCL_OF_C10D), key=lambda e: e["ts"])
    ran = defaultdict(list)  # (gloo op, elements) → its gloo events in the order they started
    for event in sorted((e for e in events if e.get("name", "").startswith("gloo:")), key=lambda e: e["ts"]):
        ran[(event["name"], prod(event["args"]["Input Dims"][0]))].append(event)
    rank = document["distributedInfo"]["rank"]
    next_id = max(e.get("args", {}).get("External id", 0) for e in events) + 1
    sequence = defaultdict(int)
    rewritten = [e for e in events if not e.get("name", "").startswith("gloo:")]
    for number, op in enumerate(ops):
        name, title, gloo_op = NCCL_OF_C10D[op["name"]]
        group = "1" if op["name"] == "c10d::allreduce_" else "0"
        sequence[group] += 1
        in_elements, out_elements = element_counts(op)
        gloo = ran[(gloo_op, in_elements)].pop(0)
        collective = {
            "Collective name": name, "In msg nelems": in_elements, "Out msg nelems": out_elements, "Group size": 2,
            "dtype": C10_DTYPE[gloo["args"]["Input type"][0]], "In split size": "[]", "Out split size": "[]",
            "Process Group Name": group, "Process Group Description": GROUPS[group], "Process Group Ranks": "[0, 1]",
        }  # fmt: skip
        external_id = next_id + number
        thread = {"pid": op["pid"], "tid": op["tid"], "ts": op["ts"], "dur": op["dur"]}
        rewritten.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", **thread,
                          "args": {"External id": external_id, **collective, "Global rank start": 0,
                                   "Global rank stride": 1, "Rank": rank, "Seq": sequence[group]}})  # fmt: skip
        rewritten.append({"ph": "X", "cat": "user_annotation", "name": title, **thread, "args": {}})
        if kernels:
            rewritten.append({"ph": "X", "cat": "kernel", "name": f"ncclDevKernel_{name}(ncclDevKernelArgsStorage)",
                              "pid": 0, "tid": 7, "ts": gloo["ts"], "dur": gloo["dur"],
                              "args": {"External id": external_id, "device": 0, "stream": 7,
                                       "correlation": external_id, **collective}})  # fmt: skip
    assert not any(ran.values()), "every gloo call pairs with the c10d op that asked for it"
    info = document["distributedInfo"]
    configs = [{**config, "backend_config": "cuda:nccl"} for config in info["pg_config"]]
    return {**document, "distributedInfo": {**info, "backend": "nccl", "pg_config": configs, "nccl_version": "2.27.5"},
            "traceEvents": rewritten}  # fmt: skip


def nccl_files(paths: list[Path], **options) -> list[tuple[str, bytes]]:
    return [(path.name, json.dumps(as_nccl_trace(json.loads(path.read_bytes()), **options)).encode()) for path in paths]


def timed_calls(parsed) -> list[tuple]:
    columns = ["collective", "size_bytes", "start_us", "duration_us"]
    return sorted(tuple(row.values()) for row in parsed.samples.select(columns).to_pylist())


def test_an_nccl_trace_reads_the_same_calls_per_process_group_timed_by_its_kernels(fsdp2_traces: list[Path]) -> None:
    gloo = parsed_job(named(fsdp2_traces))
    nccl = parsed_job(nccl_files(fsdp2_traces))
    assert (nccl.source_format, nccl.ranks, nccl.hosts, nccl.warnings) == ("pytorch-profiler", 2, 1, [])
    # The same calls, sizes and (the kernels') times; each in the process group record_param_comms names.
    assert timed_calls(nccl) == timed_calls(gloo)
    assert nccl.elements == gloo.elements
    communicator = {LOSS: "pg 1 (metrics)"}
    assert [
        (row["size_bytes"], row["variant"]) for row in nccl.samples.select(["size_bytes", "variant"]).to_pylist()
    ] == [(size, communicator.get(size, "pg 0 (default_pg)")) for size in nccl.samples["size_bytes"].to_pylist()]
    assert nccl.observed["communicators"] == [
        {"id": f"pg {name} ({description})", "size": 2, "ranks": ["0", "1"], "hosts": ["vm"]}
        for name, description in GROUPS.items()
    ]
    assert untimed(nccl.observed["groups"]) == [
        {**group, "communicator": communicator.get(group["size_bytes"], "pg 0 (default_pg)")}
        for group in untimed(gloo.observed["groups"])
    ]
    assert (
        compare_plan_with_observed(ddp_plan(dp_impl="fsdp2"), nccl.observed)["rows"]
        == (compare_plan_with_observed(ddp_plan(dp_impl="fsdp2"), gloo.observed)["rows"])
    )


def test_an_nccl_trace_without_kernels_is_timed_by_its_cpu_events(fsdp2_traces: list[Path]) -> None:
    files = nccl_files(fsdp2_traces, kernels=False)
    parsed = parsed_job(files)
    assert parsed.warnings == [
        f"rank{rank}.json: 26 calls with no device kernel linked to its record_param_comms event: timed by that CPU "
        "event, which times the launch, not the transfer"
        for rank in (0, 1)
    ]
    launches = sorted(
        e["dur"]
        for _, content in files
        for e in json.loads(content)["traceEvents"]
        if e["name"] == "record_param_comms"
    )
    assert sorted(parsed.rank_times["duration_us"].to_pylist()) == launches


def test_an_nccl_trace_without_a_call_s_fields_is_refused_with_its_event(fsdp2_traces: list[Path]) -> None:
    document = as_nccl_trace(json.loads(fsdp2_traces[0].read_bytes()))
    index = next(i for i, e in enumerate(document["traceEvents"]) if e["name"] == "record_param_comms")
    del document["traceEvents"][index]["args"]["Group size"]
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(json.dumps(document).encode(), "rank0.json")
    assert str(refused.value) == (
        f"rank0.json: traceEvents[{index}]: record_param_comms (_allgather_base) has no In/Out msg nelems and Group "
        "size"
    )
    document["traceEvents"][index]["args"].update({"Group size": 2, "dtype": "Float9"})
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(json.dumps(document).encode(), "rank0.json")
    assert str(refused.value) == (
        f"rank0.json: traceEvents[{index}]: record_param_comms (_allgather_base) has dtype 'Float9', whose size is not "
        "known"
    )


def test_gloo_all_reduces_not_told_apart_from_the_scatters_asked_stay_all_reduces(fsdp2_traces: list[Path]) -> None:
    # Rank 0's trace without one of its two c10d::_reduce_scatter_base_ ops of body.5's 10250 gradients: its two
    # gloo all-reduces of 10250 elements no longer pair with what asked for them.
    document = json.loads(fsdp2_traces[0].read_bytes())
    scatter = next(
        e
        for e in document["traceEvents"]
        if e.get("name") == "c10d::_reduce_scatter_base_" and e["args"]["Input Dims"][1] == [10250]
    )
    document["traceEvents"].remove(scatter)
    parsed = parsed_job([("rank0.json", json.dumps(document).encode()), named(fsdp2_traces)[1]])
    groups = "2 process groups, and gloo's events do not say which ran a call: their calls are counted together"
    assert parsed.warnings == [
        f"rank0.json: {groups}",
        "rank0.json: 2 gloo all-reduces of 10250 elements, but 1 c10d call that gloo runs as one (1 "
        "reduce_scatter_tensor): not told apart, all read as all-reduces",
        f"rank1.json: {groups}",
        "4 calls not recorded by every rank of its communicator",
    ]
    calls = {(g["collective"], g["size_bytes"]): g["calls"] for g in parsed.observed["groups"]}
    assert (calls[("all_reduce", 41000)], calls[("reduce_scatter", 41000)]) == (2, 2)  # rank 0's, rank 1's


def test_an_nccl_group_s_members_are_those_the_trace_lists_not_only_the_ranks_given(fsdp2_traces: list[Path]) -> None:
    parsed = parsed_job(nccl_files(fsdp2_traces[:1]))  # rank 1's trace left out
    assert parsed.warnings == ["26 calls not recorded by every rank of its communicator"]
    assert [(c["id"], c["ranks"]) for c in parsed.observed["communicators"]] == [
        ("pg 0 (default_pg)", ["0", "1"]),
        ("pg 1 (metrics)", ["0", "1"]),
    ]
