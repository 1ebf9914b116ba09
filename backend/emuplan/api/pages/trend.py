"""/trend: what changed since the previous run, then each figure over time, over ``services.trend``."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.deps import INT64_MAX, ReadSessionDep
from emuplan.api.errors import error_response
from emuplan.api.render import render
from emuplan.results.analysis.trend import figure_label
from emuplan.services import trend as trend_service
from emuplan.wording import change

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


@router.get("/trend", name="trend_page", response_class=HTMLResponse)
def trend_page(
    request: Request,
    session: ReadSessionDep,
    platform: str = "",
    collective: str = "",
    tag: str = "",
    ranks: str = "",
    sizes: str = "",
) -> HTMLResponse:
    """What changed since the previous run first, then each figure over time (drawn by trend.js). The filters
    are a GET form: the URL keeps them, and an empty field filters nothing."""
    chosen = platform or trend_service.newest_platform(session)
    filters = {"platform": chosen or "", "collective": collective, "tag": tag, "ranks": ranks, "sizes": sizes}
    context = {"nav": "trend", "platforms": trend_service.platform_names(session), "filters": filters}
    if chosen is None:
        return render(request, "trend.html", **context)
    rank_count = int(ranks) if ranks.isdigit() and 0 < int(ranks) <= INT64_MAX else None
    try:
        series = trend_service.trend(
            session, chosen, collective=collective or None, tag=tag or None, ranks=rank_count,
            sizes=trend_service.sizes_from_text(sizes),
        )  # fmt: skip
    except (LookupError, ValueError) as failure:
        answer = error_response(failure)
        return render(request, "trend.html", status_code=answer.status_code, error=answer.detail, **context)
    given = {key: value for key, value in {**filters, "collective": series["collective"]}.items() if value}
    return render(
        request, "trend.html", series=series, query=given, figure_label=figure_label, change=change, **context
    )
