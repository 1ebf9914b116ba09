"""/api/trend: series over time as JSON, and /api/trend/figures, their charts, over ``services.trend`` (the
/trend page: ``api/pages/trend.py``; Prometheus' /metrics: ``api/routes/metrics.py``)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from emuplan.api.access import requires_roles
from emuplan.api.deps import INT64_MAX, ReadSessionDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.charts.trend import trend_figure
from emuplan.results.analysis.trend import figure_label
from emuplan.services import trend as trend_service

router = APIRouter(
    prefix="/api/trend", tags=["trend"], dependencies=requires_roles(), responses=errors(*SIGNED_IN, 404, 422)
)


def series_query(
    platform: Annotated[str, Query(description="The platform whose runs make the series.")],
    collective: Annotated[str | None, Query(description="Default: the newest run's first collective.")] = None,
    tag: Annotated[str | None, Query(description="Only runs with this tag (any case).")] = None,
    ranks: Annotated[int | None, Query(ge=1, le=INT64_MAX, description="Only runs of this many ranks.")] = None,
    sizes: Annotated[
        str | None,
        Query(description="busbw at these sizes (bytes, comma-separated); default: the largest 3 all share."),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=trend_service.MAX_SERIES_RUNS, description="The newest runs read.")
    ] = trend_service.SERIES_RUNS,
) -> dict:
    return {"platform": platform, "collective": collective or None, "tag": tag or None, "ranks": ranks,
            "sizes": trend_service.sizes_from_text(sizes), "limit": limit}  # fmt: skip


SeriesQueryDep = Annotated[dict, Depends(series_query)]


@router.get("", name="get_trend")
def get_trend(query: SeriesQueryDep, session: ReadSessionDep) -> dict:
    """The series' newest runs with their figures (peak and average busbw, busbw at the chosen sizes), each
    judged against the noise band of the up to 7 runs before it, and ``what_changed`` since the previous run."""
    return trend_service.trend(session, **query)


def series_figures(series: dict) -> list[dict]:
    """One chart per figure of the series, in the order the series lists them."""
    return [
        {"figure": name, "plot": trend_figure(name, entries, title=f"{series['collective']}: {figure_label(name)}")}
        for name, entries in series["figures"].items()
    ]


@router.get("/figures", name="get_trend_figures")
def get_trend_figures(query: SeriesQueryDep, session: ReadSessionDep) -> list[dict]:
    """The trend page's Plotly figures: each figure over time, its noise band shaded, regressions marked."""
    return series_figures(trend_service.trend(session, **query))
