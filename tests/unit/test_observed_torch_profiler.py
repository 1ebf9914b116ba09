"""PyTorch profiler traces of real DDP steps (2 gloo CPU ranks, tests/profiled_ddp.py) read as an observed run,
and held against the framework-mode data-parallel plan of the same model: they agree exactly."""

from pathlib import Path

import pytest

from emuplan.results import ResultFileError, parse_result_file
from emuplan.results.budget import ImportBudget
from emuplan.results.observed import parse_observed
from emuplan.results.plan_vs_observed import compare_plan_with_observed
from profiled_ddp import ThreeLayers, ddp_plan, profiled_ddp_steps, three_layers_input


def parsed_job(files):
    """``parse_observed`` within a budget of the default limits, released afterwards as an import's is."""
    with ImportBudget() as budget:
        return parse_observed(files, budget=budget)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return profiled_ddp_steps(ThreeLayers, three_layers_input, tmp_path_factory.mktemp("traces"))


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
        ("broadcast", 8): (1, "long int"),
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


def test_a_trace_cut_short_is_refused_with_its_line(traces: list[Path]) -> None:
    content = traces[0].read_bytes()
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(content[: len(content) // 2], "rank0.json")
    message = str(refused.value)
    assert message.startswith("rank0.json: line ") and message.endswith("(the trace is cut short)"), message
