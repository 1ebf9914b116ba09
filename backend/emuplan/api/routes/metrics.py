"""/metrics: each series' newest run in Prometheus' text format, for a team's Grafana, over ``services.trend``."""

from collections.abc import Iterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from emuplan.api.access import RoleRequired
from emuplan.api.deps import ReadSessionDep, SettingsDep
from emuplan.services import trend as trend_service

router = APIRouter(include_in_schema=False)


def metrics_access(request: Request) -> None:
    """/metrics asks a viewer's sign-in like any read, unless ``EMUPLAN_METRICS_PUBLIC`` opens it."""
    if not request.app.state.settings.metrics_public:
        RoleRequired()(request)


LABELS = ("platform", "collective", "tag", "ranks")


class SeriesCollector:
    """The gauges of each series' newest run, built afresh per scrape (no state kept between them)."""

    def __init__(self, latest: list[trend_service.LatestInSeries]):
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


def metrics_chunks(latest: list[trend_service.LatestInSeries], dropped: int) -> Iterator[bytes]:
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


@router.get("/metrics", name="metrics", dependencies=[Depends(metrics_access)])
def metrics(session: ReadSessionDep, settings: SettingsDep) -> StreamingResponse:
    """Each series' newest run: peak and average busbw, its id, its verdict and % of expected when known; at most
    ``EMUPLAN_METRICS_MAX_SERIES`` series (Prometheus' guidance: bounded label values), the rest counted."""
    latest = trend_service.latest_per_series(session, settings)
    kept = latest[: settings.metrics_max_series]
    return StreamingResponse(metrics_chunks(kept, len(latest) - len(kept)), media_type=CONTENT_TYPE_LATEST)
