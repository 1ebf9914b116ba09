"""Series over time: ``GET /api/trend`` (JSON), ``/api/trend/figures`` (its charts), the ``/trend`` page and
``GET /metrics`` (Prometheus' text format, for a team's Grafana), all over ``services.trend``."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from emuplan.api.access import RoleRequired, requires_roles
from emuplan.api.deps import INT64_MAX, ReadSessionDep, SettingsDep
from emuplan.api.errors import error_response
from emuplan.api.pages import render
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.charts.trend import trend_figure
from emuplan.results.analysis.trend import figure_label
from emuplan.services import trend as store
from emuplan.wording import change

router = APIRouter(
    prefix="/api/trend", tags=["trend"], dependencies=requires_roles(), responses=errors(*SIGNED_IN, 404, 422)
)
page_router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))
metrics_router = APIRouter(include_in_schema=False)


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
        int, Query(ge=1, le=store.MAX_SERIES_RUNS, description="The newest runs read.")
    ] = store.SERIES_RUNS,
) -> dict:
    return {"platform": platform, "collective": collective or None, "tag": tag or None, "ranks": ranks,
            "sizes": store.sizes_from_text(sizes), "limit": limit}  # fmt: skip


SeriesQueryDep = Annotated[dict, Depends(series_query)]


@router.get("")
def get_trend(query: SeriesQueryDep, session: ReadSessionDep) -> dict:
    """The series' newest runs with their figures (peak and average busbw, busbw at the chosen sizes), each
    judged against the noise band of the up to 7 runs before it, and ``what_changed`` since the previous run."""
    return store.trend(session, **query)


def series_figures(series: dict) -> list[dict]:
    """One chart per figure of the series, in the order the series lists them."""
    return [
        {"figure": name, "plot": trend_figure(name, entries, title=f"{series['collective']}: {figure_label(name)}")}
        for name, entries in series["figures"].items()
    ]


@router.get("/figures")
def get_trend_figures(query: SeriesQueryDep, session: ReadSessionDep) -> list[dict]:
    """The trend page's Plotly figures: each figure over time, its noise band shaded, regressions marked."""
    return series_figures(store.trend(session, **query))


@page_router.get("/trend", response_class=HTMLResponse)
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
    chosen = platform or store.newest_platform(session)
    filters = {"platform": chosen or "", "collective": collective, "tag": tag, "ranks": ranks, "sizes": sizes}
    context = {"nav": "trend", "platforms": store.platform_names(session), "filters": filters}
    if chosen is None:
        return render(request, "trend.html", **context)
    rank_count = int(ranks) if ranks.isdigit() and 0 < int(ranks) <= INT64_MAX else None
    try:
        series = store.trend(
            session, chosen, collective=collective or None, tag=tag or None, ranks=rank_count,
            sizes=store.sizes_from_text(sizes),
        )  # fmt: skip
    except (LookupError, ValueError) as failure:
        answer = error_response(failure)
        return render(request, "trend.html", status_code=answer.status_code, error=answer.detail, **context)
    given = {key: value for key, value in {**filters, "collective": series["collective"]}.items() if value}
    return render(
        request, "trend.html", series=series, query=given, figure_label=figure_label, change=change, **context
    )


def metrics_access(request: Request) -> None:
    """/metrics asks a viewer's sign-in like any read, unless ``EMUPLAN_METRICS_PUBLIC`` opens it."""
    if not request.app.state.settings.metrics_public:
        RoleRequired()(request)


LABELS = ("platform", "collective", "tag", "ranks")


class SeriesCollector:
    """The gauges of each series' newest run, built afresh per scrape (no state kept between them)."""

    def __init__(self, latest: list[store.LatestInSeries]):
        self.latest = latest

    def collect(self):
        peak = GaugeMetricFamily(
            "emuplan_series_peak_busbw_gbps",
            "Peak busbw of the series' newest run, GB/s (1 GB = 1e9 B).",
            labels=LABELS,
        )
        average = GaugeMetricFamily(
            "emuplan_series_average_busbw_gbps",
            "Average busbw of the series' newest run (nccl-tests' '# Avg bus bandwidth'), GB/s.",
            labels=LABELS,
        )
        run = GaugeMetricFamily("emuplan_series_latest_run_id", "Id of the series' newest run.", labels=LABELS)
        verdict = GaugeMetricFamily(
            "emuplan_series_verdict",
            "1 for the newest run's verdict (pass, degraded, fail, not judged), per series; absent while it has none.",
            labels=(*LABELS, "verdict"),
        )
        expected = GaugeMetricFamily(
            "emuplan_series_pct_of_expected",
            "% of the platform's expected busbw the newest run reached where bandwidth dominates; absent while "
            "unknown.",
            labels=LABELS,
        )
        regression = GaugeMetricFamily(
            "emuplan_series_regression",
            "1 when the newest run's peak or average busbw regressed against the runs before it (from the second "
            "run on: their median ± 5 %), else 0; absent for a series' first run.",
            labels=LABELS,
        )
        for entry in self.latest:
            labels = [entry.platform, entry.collective, entry.tag, "" if entry.ranks is None else str(entry.ranks)]
            run.add_metric(labels, entry.run_id)
            if entry.peak_busbw_gbps is not None:
                peak.add_metric(labels, entry.peak_busbw_gbps)
            if entry.average_busbw_gbps is not None:
                average.add_metric(labels, entry.average_busbw_gbps)
            if entry.verdict is not None:
                verdict.add_metric([*labels, entry.verdict], 1)
            if entry.pct_of_expected is not None:
                expected.add_metric(labels, entry.pct_of_expected)
            if entry.regression is not None:
                regression.add_metric(labels, int(entry.regression))
        yield from (peak, average, run, verdict, expected, regression)


class Families:
    """Metric families already built, as a collector."""

    def __init__(self, *families):
        self.families = families

    def collect(self):
        return self.families


def metrics_chunks(latest: list[store.LatestInSeries], dropped: int) -> Iterator[bytes]:
    """The scrape's text a metric family at a time (each sent as it is written), then how many series were left out."""
    left_out = GaugeMetricFamily(
        "emuplan_metrics_series_dropped",
        "Series left out of this scrape past EMUPLAN_METRICS_MAX_SERIES (kept: by platform, newest runs first).",
        value=dropped,
    )
    for family in (*SeriesCollector(latest).collect(), left_out):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Families(family))
        yield generate_latest(registry)


@metrics_router.get("/metrics", dependencies=[Depends(metrics_access)])
def metrics(session: ReadSessionDep, settings: SettingsDep) -> StreamingResponse:
    """Each series' newest run: peak and average busbw, its id, its verdict and % of expected when known; at most
    ``EMUPLAN_METRICS_MAX_SERIES`` series (Prometheus' guidance: bounded label values), the rest counted."""
    latest = store.latest_per_series(session, settings)
    kept = latest[: settings.metrics_max_series]
    return StreamingResponse(metrics_chunks(kept, len(latest) - len(kept)), media_type=CONTENT_TYPE_LATEST)
