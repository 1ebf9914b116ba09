"""/plans: every stored plan, newest first, a page at a time, with the runs linked to each. Where a plan is found
to open it, and from its page rename, retag, annotate or delete it, as /runs is for runs.
/plans/{plan_id}: one saved plan, read-only."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseInt, ReadSessionDep
from emuplan.api.pages.plan import CHOICE_TEXT, plan_form_groups
from emuplan.api.render import render
from emuplan.api.urls import url_path
from emuplan.services.workload_export import chakra_refusal
from emuplan.store import plans as store
from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


@router.get("/plans", name="plans_page", response_class=HTMLResponse)
def plans_page(request: Request, session: ReadSessionDep, page: str = "1") -> HTMLResponse:
    count = store.count_plans(session)
    pages = max(1, -(-count // store.PLANS_PER_PAGE))
    # Past the end, or not a page number: the nearest page there is.
    page_number = min(int(page) if page.isdigit() and int(page) >= 1 else 1, pages)
    offset = (page_number - 1) * store.PLANS_PER_PAGE
    listed = store.list_plans(session, limit=store.PLANS_PER_PAGE, offset=offset)
    return render(
        request,
        "plans.html",
        nav="plan",  # the Plan section of the top bar
        plans=listed,
        linked_runs=store.linked_run_counts(session, [plan.id for plan in listed]),
        first=offset + 1,
        count=count,
        newer=url_path(request.app, "plans_page", query={"page": page_number - 1}) if page_number > 1 else None,
        older=url_path(request.app, "plans_page", query={"page": page_number + 1}) if page_number < pages else None,
    )


@router.get("/plans/{plan_id}", name="saved_plan_page", response_class=HTMLResponse)
def saved_plan_page(plan_id: DatabaseInt, request: Request, session: ReadSessionDep) -> HTMLResponse:
    """A saved plan, read-only: its settings and the stored document its downloads export."""
    plan = store.get_plan(session, plan_id)
    given = set(plan.request) if plan.request is not None else None
    settings = [
        (group, [(field, plan.inputs.get(field.name), given is None or field.name in given) for field in fields])
        for group, fields in plan_form_groups()
    ]
    return render(
        request, "plan_saved.html", nav="plan", plan=plan, settings=settings, choice_text=CHOICE_TEXT,
        chakra_refusal=chakra_refusal(session, plan), simulate_gpus=list(GPUS.values()),
        simulate_gpu_labels={gpu.key: gpu.label for gpu in GPUS.values()}, simulate_default_gpu=DEFAULT_GPU,
        simulate_default_utilisation=DEFAULT_UTILISATION,
    )  # fmt: skip
