"""/comparisons/{comparison_id}: a saved comparison, as saved or under the reader's assumptions."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseInt, ReadSessionDep, id_or_none
from emuplan.api.pages.compare import compare_json_url, plan_picker_context
from emuplan.api.render import render
from emuplan.api.routes.compare import plan_choices
from emuplan.api.routes.runs import AssumptionDep
from emuplan.api.urls import url_path
from emuplan.services import comparisons as comparison_service
from emuplan.store import comparisons as comparison_store
from emuplan.store import plans as plan_store
from emuplan.store.tables import Comparison, Run

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


def saved_comparison_context(request: Request, session, comparison: Comparison) -> dict:
    """A saved comparison as it was saved: its runs that still exist, its baseline, assumptions and plans."""
    runs: list[Run] = comparison_store.present_runs(session, comparison)
    baseline_id = comparison_store.present_baseline(comparison, runs)
    saved = comparison_service.saved_assumptions(comparison).given()
    plans = comparison_store.saved_plans(session, comparison, runs)
    return {
        "comparison": comparison,
        "runs": runs,
        "baseline_id": baseline_id,
        "compare_url": compare_json_url(request, [run.id for run in runs], baseline_id, saved, plans),
        "log_x": bool(comparison.options.get("log_x")),
        "chosen": saved,
        "plan_choices": plans,
        "saved_assumptions": saved,
        "saved_plans": {run_id: plan_store.get_plan(session, plan_id).name for run_id, plan_id in plans.items()},
    }


@router.get("/comparisons/{comparison_id}", name="saved_comparison_page", response_class=HTMLResponse)
def saved_comparison_page(
    comparison_id: DatabaseInt,
    request: Request,
    session: ReadSessionDep,
    choice: AssumptionDep,
    plans: str = "",
    plan: str = "",
) -> HTMLResponse:
    """A saved comparison under the assumptions and plans it was saved with, or those the reader sets here
    (for this view only: the saved comparison and its share links keep theirs)."""
    comparison = comparison_store.get_comparison(session, comparison_id)
    context = saved_comparison_context(request, session, comparison)
    run_ids = [run.id for run in context["runs"]]
    chosen = choice.given() or context["chosen"]
    chosen_plans = plan_choices(run_ids, id_or_none(plan), plans) if plans or plan else context["plan_choices"]
    context.update(plan_picker_context(session, context["runs"], chosen_plans), chosen=chosen)
    context["compare_url"] = compare_json_url(request, run_ids, context["baseline_id"], chosen, chosen_plans)
    return render(
        request,
        "compare.html",
        nav="compare",
        assumptions_action=url_path(request.app, "saved_comparison_page", comparison_id=comparison.id),
        **context,
    )
