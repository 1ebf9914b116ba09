"""/compare: runs picked side by side, under the assumptions and plans the reader sets."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.deps import ReadSessionDep, id_or_none
from emuplan.api.errors import error_response
from emuplan.api.render import render
from emuplan.api.routes.compare import parse_run_ids, plan_choices
from emuplan.api.routes.runs import AssumptionDep
from emuplan.api.urls import url_path
from emuplan.store import plans as plan_store
from emuplan.store import runs as run_rows
from emuplan.store.tables import Run

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


def compare_json_url(
    request: Request,
    run_ids: list[int],
    baseline_id: int | None,
    chosen: dict | None = None,
    plans: dict[int, int] | None = None,
) -> str:
    query = {"runs": ",".join(map(str, run_ids))}
    if baseline_id is not None:
        query["baseline"] = str(baseline_id)
    if plans:
        query["plans"] = plans_text(plans)
    return url_path(request.app, "compare", query={**query, **(chosen or {})})


def plans_text(plans: dict[int, int]) -> str:
    """The ``plans`` query value: run:plan pairs."""
    return ",".join(f"{run_id}:{plan_id}" for run_id, plan_id in plans.items())


def plan_picker_context(session, runs: list[Run], plans: dict[int, int]) -> dict:
    """What the step-cost section's plan chooser needs: the plans to pick from and each run's current one."""
    return {
        "plan_names": plan_store.plan_names(session, 1000),
        "plan_choices": plans,
        "reading_plan_ids": {run.id: plans.get(run.id, run.plan_id) for run in runs},
    }


@router.get("/compare", name="compare_page", response_class=HTMLResponse)
def compare_page(
    request: Request,
    session: ReadSessionDep,
    choice: AssumptionDep,
    runs: str = "",
    baseline: str = "",
    plans: str = "",
    plan: str = "",
) -> HTMLResponse:
    # The newest page of runs to pick from; older ones are picked on /runs (its pages have checkboxes too).
    all_runs = run_rows.list_runs(session, limit=run_rows.RUNS_PER_PAGE)
    context = {
        "nav": "compare",
        "all_runs": all_runs,
        "newest_listed": len(all_runs),
        "run_count": run_rows.count_runs(session),
        "comparison": None,
        "runs": [],
        "selected_ids": [],
        # The assumptions the reader set (the rest: each run's own); the JSON twin takes the same.
        "chosen": choice.given(),
    }
    baseline_id = id_or_none(baseline)
    if runs:
        try:
            selected_ids = list(dict.fromkeys(parse_run_ids(runs)))
            selected = [run_rows.get_run(session, run_id) for run_id in selected_ids]
            chosen_plans = plan_choices(selected_ids, id_or_none(plan), plans)
        except (ValueError, run_rows.RunNotFound) as error:
            failure = error_response(error)
            return render(request, "compare.html", status_code=failure.status_code, error=failure.detail, **context)
        if baseline_id not in selected_ids:
            baseline_id = None
        listed = {run.id for run in all_runs}
        context["all_runs"] = all_runs + [run for run in selected if run.id not in listed]
        context.update(
            runs=selected,
            selected_ids=selected_ids,
            baseline_id=baseline_id,
            compare_url=compare_json_url(request, selected_ids, baseline_id, context["chosen"], chosen_plans),
            assumptions_action=url_path(request.app, "compare_page"),
            suggested_name=" vs ".join(run.name for run in selected)[:200],
            log_x=True,
            **plan_picker_context(session, selected, chosen_plans),
        )
    return render(request, "compare.html", **context)
