"""The HTML pages. Each one renders what the JSON API's query functions return; the numbers are
computed once, in the domain and store modules, never here or in the browser. Charts are fetched by
small ES modules from the JSON twins, because the Content-Security-Policy allows no inline script."""

from collections.abc import Callable
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader
from sqlmodel import Session

from emuplan.api.comparisons import SHARE_REFERRER_POLICY, shared_comparison_or_error
from emuplan.api.deps import ReadSessionDep, SettingsDep
from emuplan.api.runs import AssumptionDep, parse_run_ids
from emuplan.demo import DEMO_COMPARISON_NAME
from emuplan.store import comparisons as comparison_store
from emuplan.store import model_definitions as model_store
from emuplan.store import plans as plan_store
from emuplan.store import runs as run_store
from emuplan.store.models import Comparison, Plan, Run
from emuplan.workload.presets import PRESETS

router = APIRouter(include_in_schema=False)

RECENT = 8
T = TypeVar("T")


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


def found(lookup: Callable[[Session, int], T], session: Session, item_id: int) -> T:
    """``lookup(session, id)``, or 404 with its message (the store modules raise LookupError subclasses)."""
    try:
        return lookup(session, item_id)
    except LookupError as error:
        raise HTTPException(status_code=404, detail=str(error)) from None


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: ReadSessionDep) -> HTMLResponse:
    return render(
        request,
        "home.html",
        nav="home",
        plans=plan_store.list_plans(session, RECENT),
        runs=run_store.list_runs(session)[:RECENT],
        comparisons=comparison_store.list_comparisons(session, RECENT),
        demo_comparison=comparison_store.find_comparison_by_name(session, DEMO_COMPARISON_NAME),
    )


def _preset_choices() -> list[dict]:
    return [
        {"name": preset.name, "description": preset.description, "defaults": asdict(preset.defaults)}
        for preset in PRESETS.values()
    ]


def _plan_page(request: Request, session, plan: Plan | None) -> HTMLResponse:
    return render(
        request,
        "plan.html",
        nav="plan",
        presets=_preset_choices(),
        uploaded_models=model_store.list_model_definitions(session, 1000),
        plan=plan,
        initial=plan.inputs if plan else {},
    )


@router.get("/plan", response_class=HTMLResponse)
def plan_page(request: Request, session: ReadSessionDep) -> HTMLResponse:
    return _plan_page(request, session, None)


@router.get("/plans/{plan_id}", response_class=HTMLResponse)
def saved_plan_page(plan_id: int, request: Request, session: ReadSessionDep) -> HTMLResponse:
    return _plan_page(request, session, found(plan_store.get_plan, session, plan_id))


@router.get("/runs", response_class=HTMLResponse)
def runs_page(
    request: Request, session: ReadSessionDep, strategy: str = "", plan: str = "", tag: str = ""
) -> HTMLResponse:
    plan_id = int(plan) if plan.isdigit() else None
    runs = run_store.list_runs(session, strategy=strategy or None, plan_id=plan_id, tag=tag or None)
    return render(
        request,
        "runs.html",
        nav="runs",
        runs=runs,
        plans=plan_store.list_plans(session, 1000),
        strategies=run_store.STRATEGIES,
        filters={"strategy": strategy, "plan": plan_id, "tag": tag},
    )


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(
    run_id: int, request: Request, session: ReadSessionDep, settings: SettingsDep, choice: AssumptionDep
) -> HTMLResponse:
    run = found(run_store.get_run, session, run_id)
    stats = run_store.run_statistics(session, run, choice, settings)
    plan = plan_store.get_plan(session, run.plan_id) if run.plan_id is not None else None
    chosen = {key: value for key, value in asdict(choice).items() if value is not None}
    return render(
        request,
        "run.html",
        nav="runs",
        run=run,
        plan=plan,
        stats=stats,
        # The figures and the JSON twin take the same assumptions as the page.
        assumption_query=("?" + urlencode(chosen)) if chosen else "",
        # Bandwidth against data size says something from two sizes on (per-iteration runs of several sizes).
        has_bandwidth=len({g["size_bytes"] for g in stats["groups"] if g.get("algbw_gbps") is not None}) > 1,
    )


def _compare_url(run_ids: list[int], baseline_id: int | None) -> str:
    query = {"runs": ",".join(map(str, run_ids))}
    if baseline_id is not None:
        query["baseline"] = str(baseline_id)
    return "/api/compare?" + urlencode(query, safe=",")


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, session: ReadSessionDep, runs: str = "", baseline: str = "") -> HTMLResponse:
    all_runs = run_store.list_runs(session)
    context = {"nav": "compare", "all_runs": all_runs, "comparison": None, "runs": [], "selected_ids": []}
    baseline_id = int(baseline) if baseline.isdigit() else None
    if runs:
        try:
            selected_ids = list(dict.fromkeys(parse_run_ids(runs)))
            selected = [run_store.get_run(session, run_id) for run_id in selected_ids]
        except HTTPException as error:
            return render(request, "compare.html", status_code=error.status_code, error=error.detail, **context)
        except run_store.RunNotFound as error:
            return render(request, "compare.html", status_code=404, error=str(error), **context)
        if baseline_id not in selected_ids:
            baseline_id = None
        context.update(
            runs=selected,
            selected_ids=selected_ids,
            baseline_id=baseline_id,
            compare_url=_compare_url(selected_ids, baseline_id),
            run_figure_base="/api/runs",
            suggested_name=" vs ".join(run.name for run in selected)[:200],
            log_x=True,
        )
    return render(request, "compare.html", **context)


def _saved_comparison_context(session, comparison: Comparison) -> dict:
    runs: list[Run] = comparison_store.present_runs(session, comparison)
    baseline_id = comparison_store.present_baseline(comparison, runs)
    return {
        "comparison": comparison,
        "runs": runs,
        "baseline_id": baseline_id,
        "compare_url": _compare_url([run.id for run in runs], baseline_id),
        "log_x": bool(comparison.options.get("log_x")),
    }


@router.get("/comparisons/{comparison_id}", response_class=HTMLResponse)
def saved_comparison_page(comparison_id: int, request: Request, session: ReadSessionDep) -> HTMLResponse:
    comparison = found(comparison_store.get_comparison, session, comparison_id)
    context = _saved_comparison_context(session, comparison)
    return render(request, "compare.html", nav="compare", run_figure_base="/api/runs", **context)


@router.get("/s/{token}", response_class=HTMLResponse)
def shared_comparison_page(token: str, request: Request, session: ReadSessionDep) -> HTMLResponse:
    """The read-only page a share link opens: this comparison, nothing else (no navigation, no edits)."""
    headers = {"Referrer-Policy": SHARE_REFERRER_POLICY, "Cache-Control": "no-store"}
    try:
        comparison = shared_comparison_or_error(session, token)
    except HTTPException as error:
        return render(request, "share_gone.html", status_code=error.status_code, headers=headers, detail=error.detail)
    context = _saved_comparison_context(session, comparison)
    context.update(compare_url=f"/api/shared/{token}", run_figure_base=f"/api/shared/{token}/runs")
    return render(request, "shared.html", headers=headers, **context)
