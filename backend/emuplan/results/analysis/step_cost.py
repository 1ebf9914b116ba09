"""What one training step of a plan costs on a measured fabric: the unit strategies are compared by.

Strategies issue different collectives (data parallel one gradient all-reduce, tensor parallel all-gathers
of activations, pipeline point-to-point sends), so their runs share no (collective, data size) and no
ratio between them means anything. What does: for every collective the plan issues in one step,
``count_per_step`` × the time the run measured for that collective and size, summed per parallel
dimension (dp, tp, pp, ep, edp) and in all — at the run's p50 and at its p99 — with the bytes those
collectives move; times the plan's trials (steps) for the whole training.

How a planned collective gets its time from a run (``basis``):

- ``measured``: the run has the collective at exactly that size (in the run's own size convention: the
  whole buffer for nccl-tests and our own measurements, KCCB's data size — the per-rank piece for
  all-gather and reduce-scatter — for every other format, as KCCB states it; a run that has exactly the
  other convention's size is read at that one).
- ``interpolated``: between the nearest two measured sizes of that collective, on the straight line
  through them in log(size)–log(time): exact for a time ∝ size^k between the two, and never outside
  the two measured times.
- ``platform-scaled``: outside the measured sizes, when the run's platform is known: the platform's expected
  time there (``results.analysis.expected``, NCCL's own model over the collective's group) × the run's measured ÷
  expected time at the nearest measured size. NCCL's curve knows where latency gives way to bandwidth and which
  algorithm takes over; the run's own ratio to it keeps what this fabric delivers.
- ``extrapolated``: outside the measured sizes, without a platform, from the α-β line t = α + S/β fitted to all measured
  sizes of that collective (non-negative least squares on relative error, ``scipy.optimize.nnls``, so
  small sizes weigh as much as large ones); needs two sizes.
- ``missing``: the run never measured that collective (or measured one size only and the plan needs
  another). Listed, never dropped: the step's total then says how many collectives it lacks.

A pipelined plan lists every stage's collectives (``PlanDocument.stages``); the stages' groups run concurrently, so
each stage is costed on its own and the step is the stage whose total (p50) is largest on this run: ``stages`` gives
every stage's total and ``bounding_stage`` the one ``rows`` and ``step`` are.

A run observed in a training job (``results.formats.observed``) with training steps is read for its own step
(``observed_step_cost``): per (collective, size, group size) its calls per step (``results.analysis.plan_vs_observed``:
per communicator, over the steps) × the time of one call — p50 and p99 of the slowest communicator of that kind,
whose group the step waits for — with the plan's label where the plan has that collective; what the plan has
and the job never issued is ``missing``. Without steps (an NCCL Inspector dump) it is read like a benchmark.

nccl-tests logs time each size out-of-place and in-place; the out-of-place time is used (its first
columns). A size sweep has one time per size (nccl-tests' mean over its iterations), so it gives a p50
and no p99. The step's p99 puts every collective at its own p99 at once: a pessimistic step, not a
percentile of measured steps. Collectives are summed as if serialised, with no overlap with compute or
with each other: what the fabric alone costs a step.
"""

import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from emuplan.results.analysis.plan_vs_observed import compare_plan_with_observed
from emuplan.results.analysis.run_analysis import time_unit
from emuplan.results.formats import NCCL_INSPECTOR, NCCL_TESTS, NCCL_TESTS_JSON, TORCH_PROFILER
from emuplan.workload.collectives import PER_RANK_PIECE_OPS, CollectiveOp, bus_bandwidth_factor, normalise_op_name
from emuplan.workload.document import PlanDocument, PlannedCollective
from emuplan.workload.inventory import INT64_MAX

# Formats whose data size is nccl-tests' whole buffer (a training job's records are read so too,
# results.formats.observed); every other states KCCB's data size.
WHOLE_BUFFER_FORMATS = frozenset({NCCL_TESTS, NCCL_TESTS_JSON, NCCL_INSPECTOR, TORCH_PROFILER})
PREFERRED_VARIANTS = ("out-of-place", "")
BASES = ("measured", "interpolated", "platform-scaled", "extrapolated", "missing")
# The expected time (µs) of a healthy platform for (op, whole-buffer size, group size); None where it has none.
ExpectedTime = Callable[[CollectiveOp, int, int], float | None]
CONVENTION = (
    "Σ over the plan's collectives of count per step × the run's time for that collective and size, "
    "serialised (no overlap with compute or each other); p99: every collective at its own p99 at once"
)


def _run_size(planned: PlannedCollective, curve: list[dict], whole_buffer: bool) -> int:
    """The size to look the planned collective up by: in the run's convention, unless the run measured the
    other convention's size exactly (a file that states the other one)."""
    ours, other = (
        (planned.bytes_total, planned.kccb_data_size) if whole_buffer else (planned.kccb_data_size, planned.bytes_total)
    )
    sizes = {group["size_bytes"] for group in curve}
    return other if ours not in sizes and other in sizes else ours


def _curves(groups: list[dict]) -> dict[str, list[dict]]:
    """Per collective op, the measured groups of one variant (out-of-place first), ascending in size."""
    by_op: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for group in groups:
        op = normalise_op_name(group["collective"])
        if op is not None and group.get("size_bytes") is not None and group["size_bytes"] > 0:
            by_op[op][group["variant"]].append(group)
    curves = {}
    for op, variants in by_op.items():
        variant = next((v for v in PREFERRED_VARIANTS if v in variants), sorted(variants)[0])
        curves[op] = sorted(variants[variant], key=lambda g: g["size_bytes"])
    return curves


def _log_log(size: int, low: dict, high: dict, key: str) -> float | None:
    t_low, t_high = low.get(key), high.get(key)
    if t_low is None or t_high is None or t_low <= 0 or t_high <= 0:
        return None
    fraction = math.log(size / low["size_bytes"]) / math.log(high["size_bytes"] / low["size_bytes"])
    return math.exp(math.log(t_low) + fraction * (math.log(t_high) - math.log(t_low)))


def _alpha_beta(size: int, curve: list[dict], key: str) -> float | None:
    from scipy.optimize import nnls  # SciPy is imported where it is used (costly at start-up)

    points = [(g["size_bytes"], g[key]) for g in curve if g.get(key) is not None and g[key] > 0]
    if len(points) < 2:
        return None
    sizes, times = np.array(points, dtype=np.float64).T
    # t = α + S·γ (γ = 1/β), each row divided by its own time: the fit's error is relative.
    coefficients, _ = nnls(np.column_stack([np.ones_like(sizes), sizes]) / times[:, None], np.ones_like(times))
    alpha, gamma = coefficients
    return float(alpha + gamma * size) if alpha + gamma * size > 0 else None


def _time_at(
    size: int, curve: list[dict], key: str, prior: Callable[[int], float | None] | None = None
) -> tuple[float | None, str, list[int]]:
    """The run's time (µs) at ``size`` from ``curve`` by ``key`` (p50_us, p99_us), its basis and the
    measured sizes it was read from; ``prior``: the platform's expected time at a size in the run's convention."""
    for group in curve:
        if group["size_bytes"] == size:
            return group.get(key), "measured", [size]
    if len(curve) < 2:
        return None, "missing", []
    if curve[0]["size_bytes"] < size < curve[-1]["size_bytes"]:
        high = next(index for index, group in enumerate(curve) if group["size_bytes"] > size)
        low_group, high_group = curve[high - 1], curve[high]
        used = [low_group["size_bytes"], high_group["size_bytes"]]
        return _log_log(size, low_group, high_group, key), "interpolated", used
    if prior is not None:
        nearest = curve[0] if size < curve[0]["size_bytes"] else curve[-1]
        scaled = _platform_scaled(size, nearest, key, prior)
        if scaled is not None:
            return scaled, "platform-scaled", [nearest["size_bytes"]]
    return _alpha_beta(size, curve, key), "extrapolated", [group["size_bytes"] for group in curve]


def _platform_scaled(size: int, nearest: dict, key: str, prior: Callable[[int], float | None]) -> float | None:
    measured, expected_there, expected_here = nearest.get(key), prior(nearest["size_bytes"]), prior(size)
    if not measured or not expected_there or not expected_here:
        return None
    return expected_here * measured / expected_there


def _missing_reason(op: str, curve: list[dict]) -> str:
    if not curve:
        return f"the run has no {op}"
    if len(curve) == 1:
        return f"the run measured {op} at {curve[0]['size_bytes']} B only"
    return f"the run's {op} times give no positive time at this size"


def _row(
    planned: PlannedCollective,
    curves: dict,
    whole_buffer: bool,
    ranks: int | None,
    sweep: bool,
    expected_us: ExpectedTime | None = None,
) -> dict:
    curve = curves.get(planned.op, [])
    size = _run_size(planned, curve, whole_buffer)
    prior = None
    if expected_us is not None and planned.group_size and planned.group_size >= 2:
        # The platform's curve takes the whole buffer; KCCB's data size is the per-rank piece of these two.
        per_rank_piece = not whole_buffer and planned.op in PER_RANK_PIECE_OPS

        def prior(at: int) -> float | None:
            return expected_us(planned.op, at * planned.group_size if per_rank_piece else at, planned.group_size)

    p50_us, basis, used = _time_at(size, curve, "p50_us", prior)
    if p50_us is None:
        basis, used = "missing", []
    p99_us = None if sweep or basis == "missing" else _time_at(size, curve, "p99_us", prior)[0]
    notes = []
    if ranks is not None and ranks != planned.group_size:
        notes.append(f"measured on {ranks} ranks; the plan runs it over {planned.group_size}")
    return {
        "op": str(planned.op),
        "label": planned.label,
        "parallel_dim": str(planned.parallel_dim),
        "phase": str(planned.phase),
        "group_size": planned.group_size,
        "count_per_step": planned.count_per_step,
        "bytes_total": planned.bytes_total,
        "bytes_per_rank": planned.bytes_per_rank,
        "run_size_bytes": size,
        "basis": basis,
        "missing_reason": _missing_reason(str(planned.op), curve) if basis == "missing" else None,
        "read_from_sizes": used,
        "time_p50_us": p50_us,
        "time_p99_us": p99_us,
        "step_p50_us": None if p50_us is None else p50_us * planned.count_per_step,
        "step_p99_us": None if p99_us is None else p99_us * planned.count_per_step,
        "notes": notes,
    }


def _wire_bytes_per_rank(row: dict) -> float:
    """Bytes one rank sends for one call on a ring (nccl-tests' bus factor × the whole buffer); 0 for a group of
    unknown size."""
    op = normalise_op_name(row["op"])
    if op is None or not row["group_size"]:
        return 0.0
    return bus_bandwidth_factor(op, row["group_size"]) * row["bytes_total"]


def _total(rows: list[dict], sweep: bool) -> dict:
    present = [row for row in rows if row["basis"] != "missing"]
    return {
        "collectives_per_step": sum(row["count_per_step"] for row in rows),
        "bytes_per_step": sum(row["count_per_step"] * row["bytes_total"] for row in rows),
        "wire_bytes_per_rank_per_step": sum(row["count_per_step"] * _wire_bytes_per_rank(row) for row in rows),
        "p50_us": sum(row["step_p50_us"] for row in present) if present else None,
        "p99_us": None if sweep or not present else sum(row["step_p99_us"] or 0.0 for row in present),
        "missing_collectives": sum(row["count_per_step"] for row in rows if row["basis"] == "missing"),
        "estimated_collectives": sum(row["count_per_step"] for row in rows if row["basis"] in BASES[1:4]),
    }


def step_cost(
    plan: PlanDocument,
    groups: list[dict],
    *,
    source_format: str,
    ranks: int | None,
    sweep: bool,
    measured: bool = False,
    expected_us: ExpectedTime | None = None,
) -> dict:
    """One training step of ``plan`` on the run whose statistics groups are ``groups``; ``expected_us``: the
    run's platform's expected time, for sizes the run did not measure (``platform-scaled``).

    ``rows``: one per planned collective (its time per call and per step, and the basis of that time);
    ``by_dimension`` and ``by_op``: the step's totals per parallel dimension and per collective kind;
    ``step``: the whole step; ``training``: the step × the plan's trials (steps)."""
    # Our own measurements time the whole buffer, as nccl-tests states it.
    whole_buffer = source_format in WHOLE_BUFFER_FORMATS or measured
    curves = _curves(groups)
    # A pipelined plan's stages communicate concurrently: each is costed on the run, and the step is the stage that
    # takes longest there (the plan's own `collectives` are the longest at its α-β model, which the run may not share).
    stage_lists = (
        [stage.collectives for stage in plan.stages]
        if plan.stages and plan.kccb_source == "analytic"
        else [plan.exported_collectives()]
    )
    per_stage = [
        [_row(item, curves, whole_buffer, ranks, sweep, expected_us) for item in items] for items in stage_lists
    ]
    totals = [_total(rows, sweep) for rows in per_stage]
    bounding = max(range(len(totals)), key=lambda index: totals[index]["p50_us"] or 0.0)
    stages = [
        {"stage": stage.stage, **total, "bounds_step": index == bounding}
        for index, (stage, total) in enumerate(zip(plan.stages, totals, strict=True))
    ] if len(stage_lists) > 1 else []  # fmt: skip
    return {
        "size_convention": "whole buffer (nccl-tests)" if whole_buffer else "KCCB data size",
        "time_source": "one time per size (sweep): p50 only" if sweep else "p50 and p99 of each size",
        "variant": next((v for v in PREFERRED_VARIANTS if any(g["variant"] == v for g in groups)), None),
        "observed_steps": None,
        "stages": stages,
        "bounding_stage": plan.stages[bounding].stage if stages else None,
        **_step_of(per_stage[bounding], plan.trials, sweep),
    }


def _step_of(rows: list[dict], trials: int, sweep: bool) -> dict:
    """The rows with their totals per parallel dimension, per collective kind, per step and for the training."""
    by_dimension, by_op = {}, {}
    for key, target in (("parallel_dim", by_dimension), ("op", by_op)):
        for value in dict.fromkeys(row[key] for row in rows):
            target[value] = _total([row for row in rows if row[key] == value], sweep)
    step = _total(rows, sweep)
    training = {
        "steps": trials,
        "p50_s": None if step["p50_us"] is None else step["p50_us"] * trials / 1e6,
        "p99_s": None if step["p99_us"] is None else step["p99_us"] * trials / 1e6,
        "bytes": step["bytes_per_step"] * trials,
    }
    unit, us_per_unit = time_unit(max((row["step_p50_us"] or 0.0 for row in rows), default=0.0))
    return {
        "convention": CONVENTION,
        "rows": rows,
        "by_dimension": by_dimension,
        "by_op": by_op,
        "step": step,
        "training": training,
        "time_unit": unit,
        "us_per_unit": us_per_unit,
    }


OBSERVED_TIME_SOURCE = (
    "the job's own calls per step (over its training steps, per communicator) × their p50 and p99, the slowest "
    "communicator's"
)


def observed_step_cost(plan: PlanDocument, observed: dict, groups: list[dict]) -> dict:
    """One training step as the job observed in ``observed`` (``results.formats.observed``) ran it (see the module's
    docstring); ``groups``: its statistics groups (per collective, size and communicator)."""
    sizes = {communicator["id"]: communicator["size"] for communicator in observed["communicators"]}
    slowest: dict[tuple, dict[str, float]] = {}
    for group in groups:
        key = (group["collective"], group["size_bytes"], sizes.get(group["variant"]))
        times = slowest.setdefault(key, {"p50_us": 0.0, "p99_us": 0.0})
        for percentile in times:
            times[percentile] = max(times[percentile], group.get(percentile) or 0.0)
    planned = {}
    for item in plan.collectives:
        planned.setdefault((item.op.value, item.bytes_total, item.group_size), item)
    comparison = compare_plan_with_observed(plan, observed)
    rows = []
    for row in comparison["rows"]:
        plan_key = (row["collective"], row["planned_size_bytes"], row["group_size"])
        seen_key = (row["collective"], row["observed_size_bytes"], row["group_size"])
        rows.append(_observed_row(row, planned.get(plan_key), slowest.get(seen_key)))
    return {
        "size_convention": "whole buffer (nccl-tests)",
        "time_source": OBSERVED_TIME_SOURCE,
        "variant": None,
        "observed_steps": comparison["steps"],
        "stages": [],
        "bounding_stage": None,
        **_step_of(rows, plan.trials, sweep=False),
    }


def _observed_row(row: dict, planned: PlannedCollective | None, times: dict[str, float] | None) -> dict:
    """A row of the plan-vs-observed comparison as a step-cost row: the job's count per step and size (the
    plan's for a collective it never issued)."""
    missing = row["status"] == "missing"
    count = row["planned_per_step"] if missing else row["observed_per_step"]
    count = int(count) if count == int(count) else count  # whole calls per step read as such (1, not 1.0)
    size = row["planned_size_bytes"] if missing else row["observed_size_bytes"]
    op = normalise_op_name(row["collective"])
    group_size = row["group_size"]
    notes = {
        "count differs": f"the plan has {row['planned_per_step']:g} per step",
        "size differs": f"the plan has {row['planned_size_bytes']} B",
        "unexpected": "not in the plan",
    }
    p50_us = None if missing or times is None else times["p50_us"]
    p99_us = None if missing or times is None else times["p99_us"]
    return {
        "op": row["collective"],
        "label": planned.label if planned is not None else "not in the plan",
        "parallel_dim": str(planned.parallel_dim) if planned is not None else "unplanned",
        "phase": str(planned.phase) if planned is not None else "observed",
        "group_size": group_size,
        "count_per_step": count,
        "bytes_total": size,
        "bytes_per_rank": size // group_size if op in PER_RANK_PIECE_OPS and group_size else size,
        "run_size_bytes": size,
        "basis": "missing" if p50_us is None else "measured",
        "missing_reason": "the job never issued it" if missing else None,
        "read_from_sizes": [] if p50_us is None else [size],
        "time_p50_us": p50_us,
        "time_p99_us": p99_us,
        "step_p50_us": None if p50_us is None else p50_us * count,
        "step_p99_us": None if p99_us is None else p99_us * count,
        "notes": [notes[row["status"]]] if row["status"] in notes else [],
    }


def compare_step_costs(entries: list[dict], baseline_id: int | None) -> dict:
    """The step-cost table of a comparison: one row per run (``entries``: run_id, name, strategy, plan,
    cost — None for a run without a plan), × the baseline's step at p50 and p99 (the comparison's baseline
    when it has a step cost, else the first run that has one), and ``ranking``, cheapest step first."""
    costed = [entry for entry in entries if entry["cost"] is not None]
    ids = [entry["run_id"] for entry in costed]
    reference_id = baseline_id if baseline_id in ids else (ids[0] if ids else None)
    reference = next((entry["cost"]["step"] for entry in costed if entry["run_id"] == reference_id), None)

    def ratio(step: dict, key: str) -> float | None:
        if reference is None or step[key] is None or not reference[key]:
            return None
        return step[key] / reference[key]

    rows = []
    for entry in entries:
        step = entry["cost"]["step"] if entry["cost"] is not None else None
        rows.append(
            {
                "run_id": entry["run_id"],
                "name": entry["name"],
                "strategy": entry["strategy"],
                "plan": entry["plan"],
                "step": step,
                "training": entry["cost"]["training"] if entry["cost"] is not None else None,
                "cost": entry["cost"],
                "ratio_p50": ratio(step, "p50_us") if step else None,
                "ratio_p99": ratio(step, "p99_us") if step else None,
            }
        )
    unit, us_per_unit = time_unit(max((row["step"]["p50_us"] or 0.0 for row in rows if row["step"]), default=0.0))
    ranked = sorted((row for row in rows if row["step"] and row["step"]["p50_us"] is not None),
                    key=lambda row: row["step"]["p50_us"])  # fmt: skip
    return {
        "baseline_run_id": reference_id,
        "rows": rows,
        "ranking": [row["run_id"] for row in ranked],
        "without_plan": [row["run_id"] for row in rows if row["plan"] is None],
        "convention": CONVENTION,
        "time_unit": unit,
        "us_per_unit": us_per_unit,
    }


def parse_plan_choices(text: str | None) -> dict[int, int]:
    """``"4:1,5:2"`` (run id: plan id) → ``{4: 1, 5: 2}``; a ValueError naming the ``plans`` field otherwise."""
    choices: dict[int, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        run_text, separator, plan_text = part.partition(":")
        if not separator or not run_text.strip().isdigit() or not plan_text.strip().isdigit():
            raise ValueError(f"plans: expected run:plan pairs such as 4:1,5:2, got {part.strip()!r}")
        run_id, plan_id = int(run_text), int(plan_text)
        if run_id > INT64_MAX or plan_id > INT64_MAX:
            raise ValueError(f"plans: {part.strip()!r} is not a pair of ids (0 to 2^63 − 1)")
        choices[run_id] = plan_id
    return choices
