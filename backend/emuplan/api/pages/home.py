"""/: the home page, the newest plans, runs and comparisons."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.deps import ReadSessionDep
from emuplan.api.render import render
from emuplan.demo import DEMO_COMPARISON_NAME
from emuplan.store import comparisons as comparison_store
from emuplan.store import plans as plan_store
from emuplan.store import runs as run_rows

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))

RECENT = 8


@router.get("/", name="home", response_class=HTMLResponse)
def home(request: Request, session: ReadSessionDep) -> HTMLResponse:
    return render(
        request,
        "home.html",
        nav="home",
        plans=plan_store.recent_plans(session, RECENT),
        runs=run_rows.list_runs(session, limit=RECENT),
        comparisons=comparison_store.list_comparisons(session, RECENT),
        demo_comparison=comparison_store.find_comparison_by_name(session, DEMO_COMPARISON_NAME),
    )
