"""Comparing stored runs: each read under the chosen assumptions and plan, their statistics compared
(``results.analysis.compare``), their step costs and verdicts side by side, and the comparison's figures
(``charts``)."""

from sqlmodel import Session

from emuplan import charts
from emuplan.results.analysis.compare import RunSummary, compare_runs
from emuplan.results.analysis.run_analysis import (
    above_ideal_warning,
    page_time_unit,
)
from emuplan.results.analysis.step_cost import compare_step_costs
from emuplan.services.platforms import platform_named
from emuplan.services.runs import AssumptionChoice, assumptions_of, judged_run, platform_header, reading_plan
from emuplan.settings import Settings
from emuplan.store.runs import get_run, summary_with_curves
from emuplan.store.tables import Comparison


def saved_assumptions(comparison: Comparison) -> AssumptionChoice:
    """The link speed, α and ranks the comparison was saved with (none: each run's own)."""
    return AssumptionChoice(**comparison.options.get("assumptions", {}))


def _bar_label(entry: dict) -> str:
    """A run's bar in the step-cost chart: its id and strategy (the table beside it names it in full)."""
    return f"#{entry['run_id']} {entry['strategy'] or ''}".strip()


def compare_stored_runs(
    session: Session,
    run_ids: list[int],
    baseline_id: int | None = None,
    *,
    settings: Settings,
    choice: AssumptionChoice | None = None,
    plans: dict[int, int] | None = None,
    log_x: bool = False,
) -> dict:
    """Statistics with deltas, KS tests, the size sweeps' per-size comparison, the step cost of each run's plan,
    each run's verdict and the comparison figures for stored runs (API, CLI, share pages), each run read as its
    stored kind. Bandwidths and % of ideal are each run's under the chosen assumptions, filled in per run like
    on its run page (``assumptions`` lists what each run got and from where). ``plans`` maps a run id to the
    plan to read it with (else its linked plan)."""
    choice = choice or AssumptionChoice()
    plans = plans or {}
    stored = [get_run(session, run_id) for run_id in dict.fromkeys(run_ids)]
    unknown = sorted(set(plans) - {r.id for r in stored})
    if unknown:
        raise ValueError(f"plans: run {unknown[0]} is not one of the compared runs")
    with_curves = {r.id: summary_with_curves(session, r) for r in stored}
    summaries, assumptions, costs, over_ideal, verdicts = [], [], [], [], []
    for r in stored:
        plan = reading_plan(session, r, plans.get(r.id))
        platform = platform_named(session, r.platform) if r.platform else None
        analysis, verdict, cost = judged_run(r, platform, assumptions_of(session, r, choice, settings, plan), plan)
        verdicts.append({"run_id": r.id, "platform": platform_header(platform), **verdict})
        summary = {**with_curves[r.id], "groups": analysis["groups"]}
        summaries.append(RunSummary(r.id, r.name, r.strategy, r.origin, summary, r.kind, analysis.get("sweep")))
        assumptions.append({"run_id": r.id, **analysis["assumptions"]})
        costs.append({"run_id": r.id, "name": r.name, "strategy": r.strategy,
                      "plan": cost["plan"] if cost else None, "cost": cost})  # fmt: skip
        if analysis["above_ideal_pct"] is not None:
            over_ideal.append((r, analysis["above_ideal_pct"], analysis["assumptions"]))
    comparison = compare_runs(summaries, baseline_id)
    comparison["assumptions"] = assumptions
    comparison["step_cost"] = compare_step_costs(costs, comparison["baseline_run_id"])
    comparison["verdicts"] = verdicts
    # % of ideal over 100 warns here as on the run page: the share page and the CLI show the same words.
    comparison["above_ideal"] = (
        {
            "highest_pct": max(pct for _, pct, _ in over_ideal),
            "run_ids": [r.id for r, _, _ in over_ideal],
            "warning": above_ideal_warning([(f"#{r.id} {r.name}", pct, a) for r, pct, a in over_ideal]),
        }
        if over_ideal
        else None
    )
    comparison["time_unit"], comparison["us_per_unit"] = page_time_unit([r.summary for r in stored])
    # Each run in its own kind's figures: a sweep's one value per size is a point of a busbw curve, never a
    # CDF step or a delay series at iteration 0.
    # A run wears one colour in every chart of the page: its place among the compared runs.
    sweep_places = [place for place, r in enumerate(stored) if r.kind == "size-sweep"]
    distribution_places = [place for place, r in enumerate(stored) if r.kind == "distribution"]
    sweeps = [(f"#{stored[i].id} {stored[i].name}", with_curves[stored[i].id]) for i in sweep_places]
    distributions = [(f"#{stored[i].id} {stored[i].name}", with_curves[stored[i].id]) for i in distribution_places]
    figures = {"sweeps": charts.comparison_sweep_figure(sweeps, sweep_places)} if sweeps else {}
    if distributions:
        figures |= {
            "cdf": charts.comparison_cdf_figure(distributions, log_x=log_x, places=distribution_places),
            "small_multiples": charts.comparison_small_multiples(distributions, log_x=log_x),
            "delays": charts.comparison_delay_figure(distributions),
        }
    costed = [(_bar_label(entry), entry["cost"]) for entry in costs if entry["cost"]]
    if costed:
        figures["step_cost"] = charts.step_cost_figure(costed)
    comparison["figures"] = figures
    return comparison
