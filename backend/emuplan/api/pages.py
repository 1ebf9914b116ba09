"""The HTML pages. Each one renders what the JSON API's query functions return; the numbers are
computed once, in the domain and store modules, never here or in the browser. Charts are fetched by
small ES modules from the JSON twins, because the Content-Security-Policy allows no inline script."""

from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader
from sqlmodel import col, select

from emuplan.api.comparisons import SHARE_REFERRER_POLICY, shared_comparison_or_error
from emuplan.api.deps import ReadSessionDep
from emuplan.store import comparisons as comparison_store
from emuplan.store.models import Plan, Run
from emuplan.workload.presets import PRESETS

router = APIRouter(include_in_schema=False)

RECENT = 8


@lru_cache
def _environment(templates_dir: Path) -> Environment:
    # Autoescape everything: run names, tags, model and file names are user input.
    return Environment(loader=FileSystemLoader(templates_dir), autoescape=True, trim_blocks=True, lstrip_blocks=True)


def render(
    request: Request, template: str, status_code: int = 200, headers: dict | None = None, **context
) -> HTMLResponse:
    environment = _environment(request.app.state.settings.frontend_dir / "templates")
    html = environment.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code=status_code, headers=headers)


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: ReadSessionDep) -> HTMLResponse:
    plans = session.exec(select(Plan).order_by(col(Plan.id).desc()).limit(RECENT)).all()
    runs = session.exec(select(Run).order_by(col(Run.id).desc()).limit(RECENT)).all()
    comparisons = comparison_store.list_comparisons(session, RECENT)
    demo = comparison_store.find_comparison_by_name(session, "Demo: data vs tensor vs pipeline")
    return render(
        request, "home.html", nav="home", plans=plans, runs=runs, comparisons=comparisons, demo_comparison=demo
    )


@router.get("/s/{token}", response_class=HTMLResponse)
def shared_comparison_page(token: str, request: Request, session: ReadSessionDep) -> HTMLResponse:
    headers = {"Referrer-Policy": SHARE_REFERRER_POLICY, "Cache-Control": "no-store"}
    try:
        comparison = shared_comparison_or_error(session, token)
    except HTTPException as error:
        return render(request, "share_gone.html", status_code=error.status_code, headers=headers, detail=error.detail)
    return render(request, "shared.html", headers=headers, comparison=comparison, token=token)


def _preset_choices() -> list[dict]:
    return [
        {"name": preset.name, "description": preset.description, "defaults": asdict(preset.defaults)}
        for preset in PRESETS.values()
    ]


@router.get("/plan", response_class=HTMLResponse)
def plan_page(request: Request) -> HTMLResponse:
    return render(request, "plan.html", nav="plan", presets=_preset_choices(), plan=None, initial={})


@router.get("/plans/{plan_id}", response_class=HTMLResponse)
def saved_plan_page(plan_id: int, request: Request, session: ReadSessionDep) -> HTMLResponse:
    plan = session.get(Plan, plan_id)
    if plan is None:
        raise HTTPException(status_code=404, detail=f"no plan with id {plan_id}")
    return render(request, "plan.html", nav="plan", presets=_preset_choices(), plan=plan, initial=plan.inputs)
