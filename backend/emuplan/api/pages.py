"""The HTML pages. Each one renders what the JSON API's query functions return; the numbers are
computed once, in the domain and store modules, never here or in the browser. Charts are fetched by
small ES modules from the JSON twins, because the Content-Security-Policy allows no inline script."""

from dataclasses import asdict, dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Annotated, TypeVar, get_args
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape
from pydantic.fields import FieldInfo

from emuplan.api.access import requires_roles
from emuplan.api.compare import parse_run_ids, plan_choices
from emuplan.api.comparisons import SHARE_REFERRER_POLICY
from emuplan.api.deps import INT64_MAX, DatabaseInt, ReadSessionDep, SettingsDep
from emuplan.api.errors import error_response
from emuplan.api.runs import AssumptionDep
from emuplan.charts.figures import COMPARISON_DELAY_POINTS, OVERLAY_POINTS, SMALL_PANEL_POINTS
from emuplan.demo import DEMO_COMPARISON_NAME
from emuplan.results.analysis.stats import collectives_in, has_bandwidth_chart
from emuplan.results.formats import FORMATS
from emuplan.roles import Role
from emuplan.services import comparisons as comparison_service
from emuplan.services import model_definitions as model_store
from emuplan.services import platforms as platform_store
from emuplan.services import runs as run_store
from emuplan.services.workload_export import chakra_refusal
from emuplan.store import comparisons as comparison_store
from emuplan.store import plans as plan_store
from emuplan.store import runs as run_rows
from emuplan.store.models import Comparison, Plan, Run
from emuplan.wording import (
    against_median,
    as_printed,
    gbps,
    parallel_degrees,
    percent,
    plural,
    ratio,
    size_range,
    thousands,
    time_in,
    time_with_unit,
    to_the_minute,
)
from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.inventory import DTYPE_BYTES
from emuplan.workload.plan_options import OptionGroup, Strategy
from emuplan.workload.presets import PRESETS

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))
# What a share link opens is reachable with the token alone, signed in or not.
shared_page_router = APIRouter(include_in_schema=False)
# The API's description is read like the API: with sign-in on, by a signed-in viewer (or an API token).
schema_router = APIRouter(include_in_schema=False, dependencies=requires_roles())

RECENT = 8
T = TypeVar("T")


def origin_badge(run: run_rows.RunBase | Run) -> Markup:
    """Where a run came from, as a badge whose tooltip says how."""
    return _origin_badge(run.origin, run.origin_detail)


def tag_badges(tags: list[str]) -> Markup:
    """A run's tags as badges, each followed by a space."""
    return _tag_badges(tuple(tags))


# A list page shows the same few origins and tag sets on most of its rows: each is written once, not once a row
# (formatting and escaping them again was a quarter of the time /runs took to render 50 rows).
@lru_cache(maxsize=256)
def _origin_badge(origin: str, detail: str) -> Markup:
    return Markup(f'<span class="badge origin-{escape(origin)}" title="{escape(detail)}">{escape(origin)}</span>')


@lru_cache(maxsize=256)
def _tag_badges(tags: tuple[str, ...]) -> Markup:
    return Markup("".join([f'<span class="badge">{escape(tag)}</span> ' for tag in tags]))


def run_sizes(run: run_rows.RunBase | Run) -> str:
    """A run's data sizes as the list shows them (``wording.size_range``)."""
    return size_range(run.size_min_bytes, run.size_max_bytes)


def run_total(count: run_rows.RunCount) -> Markup:
    """How many runs match, as a pager says it: the count, or "about" PostgreSQL's estimate to two figures."""
    if count.exact:
        return Markup(thousands(count.value))
    rounded = round(count.value, 2 - len(str(count.value)))
    why = f"PostgreSQL's estimate: runs are counted exactly up to {thousands(run_rows.EXACT_COUNT_LIMIT)}"
    return Markup(f'<span class="estimate" title="{why}">about {thousands(rounded)}</span>')


def origins(runs: list[run_rows.RunBase | Run]) -> set[str]:
    """The origins among ``runs``: the notes under a list ask it once, not once a note (Jinja's selectattr)."""
    return {run.origin for run in runs}


@lru_cache
def _environment(templates_dir: Path) -> Environment:
    # Autoescape everything: run names, tags, model and file names are user input.
    environment = Environment(
        loader=FileSystemLoader(templates_dir), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    environment.filters.update(
        plural=plural,
        thousands=thousands,
        to_the_minute=to_the_minute,
        as_printed=as_printed,
        time_in=time_in,
        time_with_unit=time_with_unit,
        gbps=gbps,
        percent=percent,
        ratio=ratio,
        against_median=against_median,
        origin_badge=origin_badge,
        tag_badges=tag_badges,
        origins=origins,
        run_sizes=run_sizes,
        run_total=run_total,
        parallel_degrees=parallel_degrees,
    )
    # What a comparison page says of its thinned charts is the number the figures were built with.
    environment.globals.update(
        comparison_delay_points=COMPARISON_DELAY_POINTS,
        comparison_overlay_points=OVERLAY_POINTS,
        comparison_panel_points=SMALL_PANEL_POINTS,
    )
    return environment


def render(
    request: Request, template: str, status_code: int = 200, headers: dict | None = None, **context
) -> HTMLResponse:
    environment = _environment(request.app.state.settings.frontend_dir / "templates")
    # Set by the role check (api/access.py) on the pages that need an account; None with sign-in off.
    signed_in = getattr(request.state, "signed_in", None)
    html = environment.get_template(template).render(
        request=request,
        static_url=request.app.state.static_files.url,
        signed_in=signed_in,
        # Controls whose requests the account's role would be refused are left out of the page.
        may=lambda needed: signed_in is None or signed_in.role.permits(Role(needed)),
        **context,
    )
    return HTMLResponse(html, status_code=status_code, headers=headers)


@router.get("/", response_class=HTMLResponse)
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


def _preset_choices() -> list[dict]:
    return [
        {"name": preset.name, "description": preset.description, "defaults": asdict(preset.defaults)}
        for preset in PRESETS.values()
    ]


# How the plan page names the choices of the request's enumerations.
CHOICE_TEXT = {
    "data": "data parallel",
    "tensor": "tensor parallel",
    "pipeline": "pipeline",
    "hybrid": "hybrid DP×TP×PP",
    "tutorial": "tutorial rules",
    "framework": "framework (PyTorch)",
    "ddp": "DDP",
    "fsdp2": "FSDP2",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3",
    "0.11": "0.11 or older",
    "0.16": "0.12 – 0.16",
}


@dataclass(frozen=True)
class FormField:
    """One control of the plan form, made from a ``PlanRequest`` field."""

    name: str
    label: str
    help: str
    kind: str  # select | checkbox | integer | decimal
    choices: tuple[tuple[str, str], ...] = ()
    default: object = None  # the request's own default; None: the planner fills it in from the model


def _form_field(name: str, info: FieldInfo) -> FormField:
    kind_type = next(t for t in (get_args(info.annotation) or (info.annotation,)) if t is not type(None))
    default = None if info.is_required() else info.default
    base = {"name": name, "label": info.title, "help": info.description, "default": default}
    if isinstance(kind_type, type) and issubclass(kind_type, Enum):
        return FormField(**base, kind="select", choices=tuple((m.value, CHOICE_TEXT[m.value]) for m in kind_type))
    if name.endswith("_dtype"):
        return FormField(**base, kind="select", choices=tuple((dtype, dtype) for dtype in DTYPE_BYTES))
    if kind_type is bool:
        return FormField(**base, kind="checkbox")
    return FormField(**base, kind="integer" if kind_type is int else "decimal")


def plan_form_groups() -> list[tuple[OptionGroup, list[FormField]]]:
    """The plan form: every ``PlanRequest`` field, in its option group (the CLI's help panels)."""
    fields = [
        (PlanRequest.option_group(name), _form_field(name, info)) for name, info in PlanRequest.model_fields.items()
    ]
    return [(group, [field for field_group, field in fields if field_group is group]) for group in OptionGroup]


def _plan_page(request: Request, session, initial: dict, based_on: Plan | None = None) -> HTMLResponse:
    return render(
        request,
        "plan.html",
        nav="plan",
        presets=_preset_choices(),
        uploaded_models=model_store.list_model_definitions(session, 1000),
        form_groups=plan_form_groups(),
        initial=initial,
        based_on=based_on,
        platform_choices=platform_store.platform_titles(session),
    )


@router.get("/plan", response_class=HTMLResponse)
def plan_page(
    request: Request, session: ReadSessionDep, from_plan: Annotated[DatabaseInt | None, Query(alias="from")] = None
) -> HTMLResponse:
    """The plan form; ``?from=<id>`` fills it with a saved plan's request ("Edit as a new plan")."""
    if from_plan is None:
        return _plan_page(request, session, {})
    plan = plan_store.get_plan(session, from_plan)
    # Plans stored before requests were kept offer their filled-in inputs instead.
    return _plan_page(request, session, plan.request if plan.request is not None else plan.inputs, plan)


@router.get("/plans/{plan_id}", response_class=HTMLResponse)
def saved_plan_page(plan_id: DatabaseInt, request: Request, session: ReadSessionDep) -> HTMLResponse:
    """A saved plan, read-only: its settings and the stored document its downloads export."""
    plan = plan_store.get_plan(session, plan_id)
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


def id_or_none(text: str) -> int | None:
    """A filter's id from the query string; anything that cannot be a stored id filters nothing."""
    return int(text) if text.isdigit() and int(text) <= INT64_MAX else None


# The runs list's filters as the page's query string names them (``q``: a part of the name); ``plan``,
# ``ranks``, ``hosts`` and ``size`` are numbers, the rest text.
RUN_LIST_FILTERS = ("q", "collective", "platform", "verdict", "kind", "strategy", "plan", "ranks", "hosts", "size",
                    "tag", "fact")  # fmt: skip
NUMBER_FILTERS = {"plan": "plan_id", "ranks": "ranks", "hosts": "hosts", "size": "size"}


def run_list_state(query: dict[str, str]) -> tuple[run_rows.RunFilters, str, dict[str, str]]:
    """The filters and sort of a runs-list URL, and the query that keeps them (what the page's links carry).
    A value that cannot match (a plan id that is not a number, an unknown sort) is dropped, not refused."""
    kept = {key: query[key].strip() for key in (*RUN_LIST_FILTERS, "sort") if query.get(key, "").strip()}
    numbers = {key: id_or_none(kept[key]) for key in NUMBER_FILTERS if key in kept}
    kept.update({key: str(value) for key, value in numbers.items() if value is not None})
    for key in [key for key, value in numbers.items() if value is None]:
        del kept[key]
    if kept.get("sort") not in run_rows.RUN_SORTS or kept.get("sort") == "newest":
        kept.pop("sort", None)
    filters = run_rows.RunFilters(
        **{field: numbers[key] for key, field in NUMBER_FILTERS.items() if numbers.get(key) is not None},
        **{
            ("text" if key == "q" else key): kept[key]
            for key in RUN_LIST_FILTERS
            if key in kept and key not in NUMBER_FILTERS
        },
    )
    return filters, kept.get("sort", "newest"), kept


@router.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, session: ReadSessionDep, page: str = "1") -> HTMLResponse:
    """Every run, a page at a time: filtered and sorted by what the URL says (so a view can be bookmarked)."""
    filters, sort, query = run_list_state(dict(request.query_params))
    count = run_rows.count_runs(session, filters)
    asked = int(page) if page.isdigit() and int(page) >= 1 else 1
    per_page = run_rows.RUNS_PER_PAGE
    if count.exact:
        pages = max(1, -(-count.value // per_page))
        page_number = min(asked, pages)  # past the end: the last page
        offset = (page_number - 1) * per_page
        listed = run_rows.list_runs(session, filters, sort=sort, limit=per_page, offset=offset, total=count.value)
        more = page_number < pages
    else:
        # An estimate bounds nothing: one run more than the page says whether a next one follows.
        page_number = asked
        offset = (page_number - 1) * per_page
        listed = run_rows.list_runs(session, filters, sort=sort, limit=per_page + 1, offset=offset)
        more, listed = len(listed) > per_page, listed[:per_page]
    return render(
        request,
        "runs.html",
        nav="runs",
        runs=listed,
        pager={
            "first": offset + 1,
            "count": count,
            "page": page_number,
            "newer": f"/runs?{urlencode({**query, 'page': page_number - 1})}" if page_number > 1 else None,
            "older": f"/runs?{urlencode({**query, 'page': page_number + 1})}" if more else None,
            "first_page": f"/runs?{urlencode(query)}" if query else "/runs",
        },
        plans=plan_store.plan_names(session, 1000),
        platform_choices=platform_store.platform_titles(session),
        strategies=[strategy.value for strategy in Strategy],
        collectives=[op.value for op in CollectiveOp],
        formats=FORMATS,
        filters=query,
        filtered=bool(filters.given()),
        sort=sort,
        sort_url=lambda key: "/runs?" + urlencode({**{k: v for k, v in query.items() if k != "sort"}, "sort": key}),
    )


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(
    run_id: DatabaseInt,
    request: Request,
    session: ReadSessionDep,
    settings: SettingsDep,
    choice: AssumptionDep,
    plan: str = "",
) -> HTMLResponse:
    run = run_rows.get_run(session, run_id)
    chosen_plan = id_or_none(plan)
    stats = run_store.run_statistics(session, run, choice, settings, plan_id=chosen_plan)
    linked = plan_store.get_plan(session, run.plan_id) if run.plan_id is not None else None
    chosen = choice.given()
    # The figures and the JSON twin take the same assumptions and plan as the page.
    query = {**chosen, **({"plan": chosen_plan} if chosen_plan is not None else {})}
    return render(
        request,
        "run.html",
        nav="runs",
        run=run,
        plan=linked,
        stats=stats,
        assumption_query=("?" + urlencode(query)) if query else "",
        assumption_values=chosen,
        chosen_plan=chosen_plan,
        plan_names=plan_store.plan_names(session, 1000),
        platform_choices=platform_store.platform_titles(session),
        has_bandwidth=has_bandwidth_chart(stats),
        run_collectives=collectives_in(stats),
        collectives=[op.value for op in CollectiveOp],
        observed=run_store.observed_on_page(session, run, chosen_plan),
    )


def _compare_url(
    run_ids: list[int], baseline_id: int | None, chosen: dict | None = None, plans: dict[int, int] | None = None
) -> str:
    query = {"runs": ",".join(map(str, run_ids))}
    if baseline_id is not None:
        query["baseline"] = str(baseline_id)
    if plans:
        query["plans"] = plans_text(plans)
    return "/api/compare?" + urlencode({**query, **(chosen or {})}, safe=",:")


def plans_text(plans: dict[int, int]) -> str:
    """The ``plans`` query value: run:plan pairs."""
    return ",".join(f"{run_id}:{plan_id}" for run_id, plan_id in plans.items())


def _plan_picker_context(session, runs: list[Run], plans: dict[int, int]) -> dict:
    """What the step-cost section's plan chooser needs: the plans to pick from and each run's current one."""
    return {
        "plan_names": plan_store.plan_names(session, 1000),
        "plan_choices": plans,
        "reading_plan_ids": {run.id: plans.get(run.id, run.plan_id) for run in runs},
    }


@router.get("/compare", response_class=HTMLResponse)
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
            compare_url=_compare_url(selected_ids, baseline_id, context["chosen"], chosen_plans),
            assumptions_action="/compare",
            suggested_name=" vs ".join(run.name for run in selected)[:200],
            log_x=True,
            **_plan_picker_context(session, selected, chosen_plans),
        )
    return render(request, "compare.html", **context)


def _saved_comparison_context(session, comparison: Comparison) -> dict:
    """A saved comparison as it was saved: its runs that still exist, its baseline, assumptions and plans."""
    runs: list[Run] = comparison_store.present_runs(session, comparison)
    baseline_id = comparison_store.present_baseline(comparison, runs)
    saved = comparison_service.saved_assumptions(comparison).given()
    plans = comparison_store.saved_plans(session, comparison, runs)
    return {
        "comparison": comparison,
        "runs": runs,
        "baseline_id": baseline_id,
        "compare_url": _compare_url([run.id for run in runs], baseline_id, saved, plans),
        "log_x": bool(comparison.options.get("log_x")),
        "chosen": saved,
        "plan_choices": plans,
        "saved_assumptions": saved,
        "saved_plans": {run_id: plan_store.get_plan(session, plan_id).name for run_id, plan_id in plans.items()},
    }


@router.get("/comparisons/{comparison_id}", response_class=HTMLResponse)
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
    context = _saved_comparison_context(session, comparison)
    run_ids = [run.id for run in context["runs"]]
    chosen = choice.given() or context["chosen"]
    chosen_plans = plan_choices(run_ids, id_or_none(plan), plans) if plans or plan else context["plan_choices"]
    context.update(_plan_picker_context(session, context["runs"], chosen_plans), chosen=chosen)
    context["compare_url"] = _compare_url(run_ids, context["baseline_id"], chosen, chosen_plans)
    return render(request, "compare.html", nav="compare", assumptions_action=f"/comparisons/{comparison.id}", **context)


@shared_page_router.get("/s/{token}", response_class=HTMLResponse)
def shared_comparison_page(token: str, request: Request, session: ReadSessionDep) -> HTMLResponse:
    """The read-only page a share link opens: this comparison, nothing else (no navigation, no edits)."""
    headers = {"Referrer-Policy": SHARE_REFERRER_POLICY, "Cache-Control": "no-store"}
    try:
        comparison = comparison_store.resolve_share_token(session, token)
    except (comparison_store.ShareLinkNotFound, comparison_store.ShareLinkGone) as error:
        failure = error_response(error)
        return render(
            request, "share_gone.html", status_code=failure.status_code, headers=headers, detail=failure.detail
        )
    context = _saved_comparison_context(session, comparison)
    context["compare_url"] = f"/api/shared/{token}"
    return render(request, "shared.html", headers=headers, **context)


@schema_router.get("/openapi.json")
def openapi_document(request: Request) -> dict:
    return request.app.openapi()


@router.get("/docs", response_class=HTMLResponse)
def api_docs_page(request: Request) -> HTMLResponse:
    """Swagger UI over /openapi.json, its files served locally (no CDN) and started by a file, not an
    inline script, so the page runs under the same CSP as every other."""
    return render(request, "docs.html")
