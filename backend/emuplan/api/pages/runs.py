"""/runs, the runs list with its filters and sort, and /runs/{run_id}, one run's page."""

from functools import partial
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseInt, ReadSessionDep, SettingsDep, id_or_none
from emuplan.api.render import render
from emuplan.api.routes.runs import AssumptionDep
from emuplan.api.urls import url_path
from emuplan.results.analysis.stats import collectives_in, has_bandwidth_chart
from emuplan.results.formats import FORMATS
from emuplan.services import platforms as platform_service
from emuplan.services import runs as run_service
from emuplan.store import plans as plan_store
from emuplan.store import runs as run_rows
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.plan_options import Strategy

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


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


@router.get("/runs", name="runs_page", response_class=HTMLResponse)
def runs_page(request: Request, session: ReadSessionDep, page: str = "1") -> HTMLResponse:
    """Every run, a page at a time: filtered and sorted by what the URL says (so a view can be bookmarked)."""
    filters, sort, query = run_list_state(dict(request.query_params))
    runs_url = partial(url_path, request.app, "runs_page")  # the same list under other query values
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
            "newer": runs_url({**query, "page": page_number - 1}) if page_number > 1 else None,
            "older": runs_url({**query, "page": page_number + 1}) if more else None,
            "first_page": runs_url(query),
        },
        plans=plan_store.plan_names(session, 1000),
        platform_choices=platform_service.platform_titles(session),
        strategies=[strategy.value for strategy in Strategy],
        collectives=[op.value for op in CollectiveOp],
        formats=FORMATS,
        filters=query,
        filtered=bool(filters.given()),
        sort=sort,
        sort_url=lambda key: runs_url({**{k: v for k, v in query.items() if k != "sort"}, "sort": key}),
    )


@router.get("/runs/{run_id}", name="run_page", response_class=HTMLResponse)
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
    stats = run_service.run_statistics(session, run, choice, settings, plan_id=chosen_plan)
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
        platform_choices=platform_service.platform_titles(session),
        has_bandwidth=has_bandwidth_chart(stats),
        run_collectives=collectives_in(stats),
        collectives=[op.value for op in CollectiveOp],
        observed=run_service.observed_on_page(session, run, chosen_plan),
    )
