"""A training job's own step (results.analysis.step_cost.observed_step_cost): its calls per step (per communicator, over
its steps) × the p50 and p99 of its calls, the slowest communicator's, against the seed MLP's data-parallel plan on 2
ranks (one all-reduce of 971048 B per step)."""

from emuplan.results.analysis.step_cost import observed_step_cost
from emuplan.services.plans import plan_request
from emuplan.workload.document import PlanRequest


def _group(collective: str, size: int, communicator: str, calls: int) -> dict:
    return {"collective": collective, "size_bytes": size, "communicator": communicator, "group_size": 2,
            "calls": calls, "calls_in_steps": calls}  # fmt: skip


def _stats(collective: str, size: int, communicator: str, p50_us: float, p99_us: float) -> dict:
    return {"collective": collective, "size_bytes": size, "variant": communicator, "p50_us": p50_us, "p99_us": p99_us}


# Two data-parallel communicators each all-reduce once per step over 2 steps; the first also all-gathers 16 KiB
# three times a step, which the plan does not predict.
OBSERVED = {
    "steps": [1, 2],
    "communicators": [{"id": c, "size": 2, "ranks": [], "hosts": []} for c in ("c0", "c1")],
    "groups": [_group("all_reduce", 971048, "c0", 2), _group("all_reduce", 971048, "c1", 2),
               _group("all_gather", 16384, "c0", 6)],
}  # fmt: skip
GROUPS = [
    _stats("all_reduce", 971048, "c0", 1000.0, 1500.0),
    _stats("all_reduce", 971048, "c1", 1200.0, 1400.0),
    _stats("all_gather", 16384, "c0", 20.0, 40.0),
]


def test_the_jobs_step_is_its_own_calls_per_step_times_the_slowest_communicators_times() -> None:
    plan = plan_request(PlanRequest(model="fashion-mnist-mlp", strategy="data", mode="framework", gpus=2))[0]
    cost = observed_step_cost(plan, OBSERVED, GROUPS)
    assert cost["observed_steps"] == 2
    rows = [(r["op"], r["label"], r["parallel_dim"], r["count_per_step"], r["bytes_total"], r["bytes_per_rank"],
             r["time_p50_us"], r["time_p99_us"], r["step_p50_us"], r["step_p99_us"], r["basis"], r["notes"])
            for r in cost["rows"]]  # fmt: skip
    assert rows == [
        ("all_reduce", plan.collectives[0].label, "dp", 1, 971048, 971048, 1200.0, 1500.0, 1200.0, 1500.0,
         "measured", []),
        ("all_gather", "not in the plan", "unplanned", 3, 16384, 8192, 20.0, 40.0, 60.0, 120.0, "measured",
         ["not in the plan"]),
    ]  # fmt: skip
    assert cost["step"] == {
        "collectives_per_step": 4,
        "bytes_per_step": 971048 + 3 * 16384,
        "wire_bytes_per_rank_per_step": 971048 + 3 * 16384 / 2,  # bus factors 2(n−1)/n = 1 and (n−1)/n = 1/2
        "p50_us": 1260.0,
        "p99_us": 1620.0,
        "missing_collectives": 0,
        "estimated_collectives": 0,
    }
    assert cost["by_dimension"]["unplanned"]["p50_us"] == 60.0
    trials = plan.trials
    assert cost["training"] == {
        "steps": trials,
        "p50_s": 1260.0 * trials / 1e6,
        "p99_s": 1620.0 * trials / 1e6,
        "bytes": (971048 + 3 * 16384) * trials,
    }


def test_a_planned_collective_the_job_never_issued_is_missing_at_the_plans_count() -> None:
    plan = plan_request(PlanRequest(model="fashion-mnist-mlp", strategy="data", mode="framework", gpus=2))[0]
    gathers_only = {**OBSERVED, "groups": OBSERVED["groups"][2:]}
    cost = observed_step_cost(plan, gathers_only, GROUPS[2:])
    (missing,) = [row for row in cost["rows"] if row["basis"] == "missing"]
    assert (missing["op"], missing["count_per_step"], missing["bytes_total"], missing["missing_reason"]) == (
        "all_reduce",
        1,
        971048,
        "the job never issued it",
    )
    assert (cost["step"]["p50_us"], cost["step"]["missing_collectives"]) == (60.0, 1)
