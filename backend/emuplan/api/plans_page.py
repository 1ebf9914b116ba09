"""/plans: every stored plan, newest first, a page at a time, with the runs linked to each. Where a plan is found
to open it, and from its page rename, retag, annotate or delete it, as /runs is for runs."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.deps import ReadSessionDep
from emuplan.api.pages import render
from emuplan.store import plans as store

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


@router.get("/plans", response_class=HTMLResponse)
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
        newer=f"/plans?page={page_number - 1}" if page_number > 1 else None,
        older=f"/plans?page={page_number + 1}" if page_number < pages else None,
    )
