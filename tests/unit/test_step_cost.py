"""The cost of a training step (results.analysis.step_cost): Σ count per step × the run's time for each planned
collective, checked by hand against the demo runs, a real nccl-tests log and exact α-β lines."""

import math

import pytest

from emuplan.demo import DEMO_SHAPES, generated_run_csv
from emuplan.results.analysis.expected import healthy_time_us
from emuplan.results.analysis.stats import summarise
from emuplan.results.analysis.step_cost import compare_step_costs, parse_plan_choices, step_cost
from emuplan.results.parse import parse_result_file
from emuplan.services.plans import plan_request
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.plan_options import Mode, Strategy
from emuplan.workload.platforms import BUILTIN_PLATFORMS
from paths import SHARED_NCCL


def _plan(**fields):
    return plan_request(PlanRequest(**fields))[0]


def _seed_plan(strategy: str):
    return _plan(model="fashion-mnist-mlp", strategy=Strategy(strategy), mode=Mode.TUTORIAL)


def _nearest_rank_p50(milliseconds: list[float]) -> float:
    """The median as the statistics define it (the value at rank ⌈n/2⌉), in µs, computed here from the CSV."""
    ordered = sorted(milliseconds)
    return ordered[math.ceil(len(ordered) / 2) - 1] * 1000.0


def _demo_run(strategy: str):
    shape = next(shape for shape in DEMO_SHAPES if shape.strategy == strategy)
    csv = generated_run_csv(shape)
    parsed = parse_result_file(csv, f"demo-{strategy}.csv")
    rows = [line.split(",") for line in csv.decode().splitlines()[1:]]
    p50_by_size = {
        size: _nearest_rank_p50([float(row[3]) for row in rows if int(row[1]) == size]) for size in shape.sizes
    }
    return summarise(parsed.samples)["groups"], parsed.source_format, p50_by_size


@pytest.mark.parametrize("strategy", ["data", "tensor", "pipeline"])
def test_a_demo_step_is_the_sum_of_count_times_the_measured_p50(strategy: str) -> None:
    groups, source_format, p50_by_size = _demo_run(strategy)
    cost = step_cost(_seed_plan(strategy), groups, source_format=source_format, ranks=None, sweep=False)
    # Every seed collective runs once per step, at a size the run measured: the step is the sum of their p50s.
    assert [row["count_per_step"] for row in cost["rows"]] == [1] * len(p50_by_size)
    assert [row["basis"] for row in cost["rows"]] == ["measured"] * len(p50_by_size)
    assert cost["step"]["p50_us"] == pytest.approx(sum(p50_by_size.values()), rel=1e-12)
    assert cost["training"]["steps"] == 8
    assert cost["training"]["p50_s"] == pytest.approx(8 * sum(p50_by_size.values()) / 1e6, rel=1e-12)
    assert cost["step"]["missing_collectives"] == 0


def test_the_demo_steps_rank_data_then_pipeline_then_tensor() -> None:
    entries = []
    for run_id, strategy in enumerate(["data", "tensor", "pipeline"], start=1):
        groups, source_format, _ = _demo_run(strategy)
        cost = step_cost(_seed_plan(strategy), groups, source_format=source_format, ranks=4, sweep=False)
        entries.append({"run_id": run_id, "name": strategy, "strategy": strategy, "plan": {"id": run_id},
                        "cost": cost})  # fmt: skip
    comparison = compare_step_costs(entries, baseline_id=1)
    # The generated demo (seeded): data 13,997.8 µs; tensor 100,032.9 µs; pipeline 20,556.2 + 20,983.7 +
    # 21,776.8 + 22,838.7 = 86,155.4 µs. The tutorials' order: TP > PP > DP.
    steps = {row["run_id"]: row["step"]["p50_us"] for row in comparison["rows"]}
    assert steps == pytest.approx({1: 13997.8, 2: 100032.9, 3: 86155.4}, rel=1e-9)
    assert comparison["ranking"] == [1, 3, 2]
    assert comparison["baseline_run_id"] == 1
    assert [row["ratio_p50"] for row in comparison["rows"]] == pytest.approx(
        [1.0, 100032.9 / 13997.8, 86155.4 / 13997.8]
    )
    assert (comparison["time_unit"], comparison["us_per_unit"]) == ("ms", 1e3)
    # Bytes on the wire: the tensor step gathers the whole 25,755,648-byte batch; the pipeline's four
    # gradient all-reduces add up to the data step's one.
    assert [row["step"]["bytes_per_step"] for row in comparison["rows"]] == [971048, 25755648, 971048]
    # One rank sends 2(n−1)/n of an all-reduce's buffer on a ring, (n−1)/n of an all-gather's.
    assert comparison["rows"][0]["step"]["wire_bytes_per_rank_per_step"] == pytest.approx(971048 * 1.5)
    assert comparison["rows"][1]["step"]["wire_bytes_per_rank_per_step"] == pytest.approx(25755648 * 0.75)


def _b200_out_of_place_times() -> dict[int, float]:
    """size → the out-of-place time (µs) the B200 log prints."""
    times = {}
    for line in (SHARED_NCCL / "b200-allreduce-2.17.6.txt").read_text().splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            times[int(fields[0])] = float(fields[5])
    return times


def test_a_framework_plan_on_an_nccl_tests_sweep_is_read_off_the_curve_log_log() -> None:
    parsed = parse_result_file((SHARED_NCCL / "b200-allreduce-2.17.6.txt").read_bytes(), "b200.txt")
    groups = summarise(parsed.samples)["groups"]
    plan = _plan(model="gpt2", strategy=Strategy.DATA, mode=Mode.FRAMEWORK, gpus=8)
    cost = step_cost(plan, groups, source_format=parsed.source_format, ranks=8, sweep=True)
    printed = _b200_out_of_place_times()

    def log_log(size: int, low: int, high: int) -> float:
        slope = math.log(printed[high] / printed[low]) / math.log(high / low)
        return printed[low] * (size / low) ** slope

    # DDP's buckets (bf16 gradients): 4,723,200 B, five of 28,351,488 B and 102,398,976 B, none a size the
    # log measured: each between the two powers of two around it.
    expected = {
        4723200: log_log(4723200, 4194304, 8388608),
        28351488: log_log(28351488, 16777216, 33554432),
        102398976: log_log(102398976, 67108864, 134217728),
    }
    assert [row["run_size_bytes"] for row in cost["rows"]] == [4723200] + [28351488] * 5 + [102398976]
    assert {row["basis"] for row in cost["rows"]} == {"interpolated"}
    for row in cost["rows"]:
        assert row["time_p50_us"] == pytest.approx(expected[row["run_size_bytes"]], rel=1e-12)
        assert row["time_p99_us"] is None  # a sweep has one time per size
    assert cost["rows"][0]["read_from_sizes"] == [4194304, 8388608]
    assert cost["step"]["p50_us"] == pytest.approx(expected[4723200] + 5 * expected[28351488] + expected[102398976])
    assert cost["step"]["p99_us"] is None
    assert cost["step"]["estimated_collectives"] == 7
    assert cost["variant"] == "out-of-place"
    assert cost["size_convention"] == "whole buffer (nccl-tests)"
    assert cost["training"]["steps"] == 100


def _line_groups(op: str, sizes: list[int], alpha_us: float, us_per_byte: float) -> list[dict]:
    return [
        {"collective": op, "size_bytes": size, "variant": "", "p50_us": alpha_us + us_per_byte * size,
         "p99_us": 2 * (alpha_us + us_per_byte * size)}
        for size in sizes
    ]  # fmt: skip


def test_sizes_beyond_the_run_are_extrapolated_on_its_alpha_beta_line() -> None:
    plan = _seed_plan("pipeline")  # all-reduces of 2,600, 33,024, 131,584 and 803,840 B
    groups = _line_groups("all_reduce", [10_000, 50_000, 100_000], alpha_us=10.0, us_per_byte=0.001)
    cost = step_cost(plan, groups, source_format="per-iteration", ranks=4, sweep=False)
    # 2,600 B and the two past 100,000 B: an exact α-β line is fitted exactly; 33,024 B lies between two
    # sizes, where log–log interpolation of a line is not the line itself.
    bases = [row["basis"] for row in cost["rows"]]
    assert bases == ["extrapolated", "interpolated", "extrapolated", "extrapolated"]
    assert cost["rows"][0]["time_p50_us"] == pytest.approx(10.0 + 2.6, rel=1e-9)
    assert cost["rows"][3]["time_p50_us"] == pytest.approx(10.0 + 803.84, rel=1e-9)
    assert cost["rows"][3]["time_p99_us"] == pytest.approx(2 * (10.0 + 803.84), rel=1e-9)
    low, high = 10.0 + 10.0, 10.0 + 50.0
    between = math.exp(math.log(low) + math.log(33024 / 10_000) / math.log(5) * math.log(high / low))
    assert cost["rows"][1]["time_p50_us"] == pytest.approx(between, rel=1e-12)
    assert cost["rows"][1]["read_from_sizes"] == [10_000, 50_000]


def test_a_collective_the_run_never_measured_is_listed_as_missing_not_dropped() -> None:
    groups, source_format, _ = _demo_run("data")
    cost = step_cost(_seed_plan("tensor"), groups, source_format=source_format, ranks=4, sweep=False)
    (row,) = cost["rows"]
    assert (row["basis"], row["missing_reason"], row["time_p50_us"]) == ("missing", "the run has no all_gather", None)
    assert cost["step"]["p50_us"] is None
    assert cost["step"]["missing_collectives"] == 1
    assert cost["step"]["bytes_per_step"] == 25755648  # what the step would move is known all the same


def test_one_measured_size_cannot_stand_for_another() -> None:
    groups = _line_groups("all_reduce", [971048], alpha_us=5.0, us_per_byte=0.01)
    cost = step_cost(_seed_plan("pipeline"), groups, source_format="per-iteration", ranks=None, sweep=False)
    assert {row["basis"] for row in cost["rows"]} == {"missing"}
    assert cost["rows"][0]["missing_reason"] == "the run measured all_reduce at 971048 B only"


def test_a_group_size_other_than_the_runs_is_noted() -> None:
    groups, source_format, _ = _demo_run("data")
    cost = step_cost(_seed_plan("data"), groups, source_format=source_format, ranks=8, sweep=False)
    assert cost["rows"][0]["notes"] == ["measured on 8 ranks; the plan runs it over 4"]


def test_per_rank_piece_sizes_match_kccb_runs_and_whole_buffers_match_nccl_tests_and_our_measurements() -> None:
    plan = _seed_plan("tensor")  # all-gather: 6,438,912 B per rank, 25,755,648 B whole
    kccb = _line_groups("all_gather", [6438912], alpha_us=1.0, us_per_byte=0.0)
    nccl = _line_groups("all_gather", [25755648], alpha_us=2.0, us_per_byte=0.0)
    assert step_cost(plan, kccb, source_format="per-iteration", ranks=4, sweep=False)["step"]["p50_us"] == 1.0
    assert step_cost(plan, nccl, source_format="nccl-tests", ranks=4, sweep=True)["step"]["p50_us"] == 2.0
    # emuplan's own measurement of the seed plan times the whole 25,755,648-byte buffer (a per-iteration CSV).
    measured = step_cost(plan, nccl, source_format="per-iteration", ranks=4, sweep=False, measured=True)
    assert (measured["rows"][0]["basis"], measured["rows"][0]["run_size_bytes"]) == ("measured", 25755648)
    assert measured["size_convention"] == "whole buffer (nccl-tests)"
    # A per-iteration file that states the whole buffer is read at it too, rather than called missing.
    stated = step_cost(plan, nccl, source_format="per-iteration", ranks=4, sweep=False)
    assert (stated["rows"][0]["basis"], stated["step"]["p50_us"]) == ("measured", 2.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4:1,5:2", {4: 1, 5: 2}), ("", {}), (" 7:3 ", {7: 3})],
)
def test_plan_choices_parse(text: str, expected: dict) -> None:
    assert parse_plan_choices(text) == expected


@pytest.mark.parametrize("text", ["4", "4:x", "a:1", "4:-1", f"{2**63}:1"])
def test_bad_plan_choices_name_the_field(text: str) -> None:
    with pytest.raises(ValueError, match=r"^plans: "):
        parse_plan_choices(text)


def test_the_interpolation_never_leaves_the_two_measured_times() -> None:
    groups = _line_groups("all_reduce", [1000, 4000], alpha_us=0.0, us_per_byte=0.1)
    plan = _plan(model="fashion-mnist-mlp", strategy=Strategy.PIPELINE, mode=Mode.TUTORIAL)
    cost = step_cost(plan, groups, source_format="per-iteration", ranks=4, sweep=False)
    inside = [row for row in cost["rows"] if row["basis"] == "interpolated"]
    assert [row["run_size_bytes"] for row in inside] == [2600]
    assert 100.0 < inside[0]["time_p50_us"] < 400.0
    assert inside[0]["time_p50_us"] == pytest.approx(260.0)  # a time ∝ size is exact in log–log


def test_with_a_platform_sizes_beyond_the_run_follow_its_expected_curve_scaled_by_the_run() -> None:
    """The same line on h100-ndr, 4 ranks on one node: outside 10,000–100,000 B each size is NCCL's expected
    time there × the run's measured ÷ expected time at the nearest measured size; between them nothing changes."""
    plan = _seed_plan("pipeline")
    groups = _line_groups("all_reduce", [10_000, 50_000, 100_000], alpha_us=10.0, us_per_byte=0.001)
    healthy = healthy_time_us(BUILTIN_PLATFORMS["h100-ndr"])
    cost = step_cost(plan, groups, source_format="per-iteration", ranks=4, sweep=False, expected_us=healthy)
    bases = [row["basis"] for row in cost["rows"]]
    assert bases == ["platform-scaled", "interpolated", "platform-scaled", "platform-scaled"]
    group_size = cost["rows"][3]["group_size"]
    op = CollectiveOp.ALL_REDUCE
    for row, nearest in ((cost["rows"][0], 10_000), (cost["rows"][3], 100_000)):
        measured = 10.0 + 0.001 * nearest
        size = row["run_size_bytes"]
        expected = healthy(op, size, group_size) * measured / healthy(op, nearest, group_size)
        assert row["time_p50_us"] == pytest.approx(expected, rel=1e-12)
        assert row["read_from_sizes"] == [nearest]
    # 803,840 B on 4 H100s: NCCL expects 1.66 × its time at 100,000 B, where this line took 110 µs (its own α-β
    # line would give 813.84 µs).
    assert round(cost["rows"][3]["time_p50_us"], 1) == 183.1
    assert cost["step"]["estimated_collectives"] == 4
