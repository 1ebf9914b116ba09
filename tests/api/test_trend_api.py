"""GET /api/trend and /metrics over eight nightly logs of one platform (tests/nightly.py): the sixth, which lost
12 % at 1 GiB, is flagged and no other night is."""

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from emuplan.api.routes.metrics import metrics_chunks
from emuplan.main import create_app
from emuplan.services.runs import relabel_collectives
from emuplan.services.series_figures import figures_of
from emuplan.services.trend import LatestInSeries, series_runs
from emuplan.settings import Settings
from emuplan.store.db import Database
from emuplan.store.tables import Run, RunTrendFigures
from nightly import BUSBW_AT_GIB, FIRST_NIGHT, GIB, LOST_FACTOR, NOISE, PLATFORM, import_nights, nightly_log

pytestmark = pytest.mark.both_databases

AT_GIB = f"busbw_gbps@{GIB}"
# The log's 8 GiB out-of-place busbw: the peak of every night (the 1 GiB loss leaves it alone).
PEAK = 338.82


def night_busbw(night: int) -> float:
    factor = NOISE[night - 1] * (LOST_FACTOR if night == 6 else 1.0)
    return round(BUSBW_AT_GIB[0] * factor, 2)


def test_the_night_that_lost_12_percent_at_1_gib_is_flagged_and_no_other(
    client: TestClient, database: Database
) -> None:
    ids = import_nights(database)
    answer = client.get("/api/trend", params={"platform": PLATFORM, "sizes": str(GIB)})
    assert answer.status_code == 200, answer.text
    series = answer.json()
    assert (series["collective"], series["sizes"], series["collectives"]) == ("all_reduce", [GIB], ["all_reduce"])
    # Newest first, each night at its time.
    assert [run["run_id"] for run in series["runs"]] == ids[::-1]
    assert series["runs"][-1]["measured_at"] == FIRST_NIGHT.isoformat().replace("+00:00", "Z")
    at_gib = series["figures"][AT_GIB]
    assert [entry["value"] for entry in at_gib] == [night_busbw(night) for night in range(1, 9)]
    assert [entry["status"] for entry in at_gib] == ["no band"] + ["within"] * 4 + ["regression"] + ["within"] * 2
    sixth = at_gib[5]
    # The band of night 6: nights 1-5's median (night 1's 297.86) ± max(3 × 1.4826 × MAD, 5 % of it).
    assert sixth["median"] == pytest.approx(297.86)
    assert (sixth["low"], sixth["high"]) == pytest.approx((297.86 * 0.95, 297.86 * 1.05))
    assert sixth["change_pct"] == pytest.approx((262.12 - 297.86) / 297.86 * 100)
    for name in ("peak_busbw_gbps", "average_busbw_gbps"):
        assert {entry["status"] for entry in series["figures"][name]} == {"no band", "within"}, name
    assert [entry["value"] for entry in series["figures"]["peak_busbw_gbps"]] == [
        round(PEAK * factor, 2) for factor in NOISE
    ]
    # The newest night is back within its band: a quiet night, in one line.
    changed = series["what_changed"]
    assert (changed["run_id"], changed["previous_run_id"], changed["quiet"]) == (ids[7], ids[6], True)
    assert (
        changed["summary"] == f"quiet: run #{ids[7]} stays within the noise band of the runs before it on every figure"
    )


def test_the_morning_after_the_sixth_night_leads_with_its_regression(client: TestClient, database: Database) -> None:
    ids = import_nights(database, 6)
    changed = client.get("/api/trend", params={"platform": PLATFORM, "sizes": str(GIB)}).json()["what_changed"]
    assert (changed["run_id"], changed["previous_run_id"], changed["quiet"]) == (ids[5], ids[4], False)
    first = changed["changes"][0]
    assert (first["figure"], first["label"], first["status"]) == (AT_GIB, "busbw at 1 GiB", "regression")
    assert first["change_since_previous_pct"] == pytest.approx((262.12 - night_busbw(5)) / night_busbw(5) * 100)
    assert [change["status"] for change in changed["changes"][1:]] == ["within", "within"]
    assert changed["summary"] == "busbw at 1 GiB regression: -12.0 % from the median"


def test_by_default_the_largest_sizes_every_run_shares_are_judged(client: TestClient, database: Database) -> None:
    import_nights(database, 4)
    series = client.get("/api/trend", params={"platform": PLATFORM}).json()
    assert series["sizes"] == [2 * GIB, 4 * GIB, 8 * GIB]
    sizes = [f"busbw_gbps@{size}" for size in series["sizes"]]
    assert list(series["figures"]) == ["peak_busbw_gbps", "average_busbw_gbps", *sizes]


def test_tag_and_ranks_narrow_the_series(client: TestClient, database: Database) -> None:
    import_nights(database, 3)
    assert (
        len(client.get("/api/trend", params={"platform": PLATFORM, "tag": "NIGHTLY", "ranks": 16}).json()["runs"]) == 3
    )
    assert client.get("/api/trend", params={"platform": PLATFORM, "tag": "weekly"}).json()["runs"] == []
    eight_ranks = client.get("/api/trend", params={"platform": PLATFORM, "ranks": 8}).json()
    assert eight_ranks["what_changed"]["summary"] == "no runs yet"
    assert len(client.get("/api/trend", params={"platform": PLATFORM, "limit": 2}).json()["runs"]) == 2


def test_bad_series_requests_say_what_is_wrong(client: TestClient, database: Database) -> None:
    import_nights(database, 2)
    unknown = client.get("/api/trend", params={"platform": "h900"})
    assert (unknown.status_code, unknown.json()["detail"]) == (
        404, "no platform named 'h900': `emuplan platforms list` shows them",
    )  # fmt: skip
    other = client.get("/api/trend", params={"platform": PLATFORM, "collective": "all_gather"})
    assert (other.status_code, other.json()["detail"]) == (
        422, "collective: no run of this series has 'all_gather'; its runs have all_reduce",
    )  # fmt: skip
    sizes = client.get("/api/trend", params={"platform": PLATFORM, "sizes": "1GiB"})
    assert sizes.status_code == 422
    assert sizes.json()["detail"].startswith("sizes: comma-separated sizes in bytes")
    assert client.get("/api/trend", params={"platform": PLATFORM, "limit": 201}).status_code == 422


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_give_each_series_newest_run_in_prometheus_text(client: TestClient, database: Database) -> None:
    ids = import_nights(database)
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    # Night 8 is the newest of the series of every tag ("") and of the tag "nightly".
    # nccl-tests' average: the mean of every busbw cell of night 8's log, out-of-place and in-place.
    rows = [row for row in (line.split() for line in nightly_log(8).decode().splitlines()) if len(row) == 13]
    cells = [float(row[column]) for row in rows for column in (7, 11)]
    assert len(cells) == 62
    average_night_8 = pytest.approx(sum(cells) / len(cells))
    # The verdict and % of expected are what night 8's run page shows: its best % where bandwidth dominates.
    stats = client.get(f"/api/runs/{ids[7]}/stats").json()
    best_pct = max(g["pct_of_expected"] for g in stats["groups"] if g["expected_latency_share"] <= 0.1)
    # On the A3 Mega's 8 × 200 Gbit/s TCPXO the log reaches what NCCL's model expects there.
    assert round(best_pct, 1) == 88.3
    assert (stats["verdict"]["status"], stats["verdict"]["reasons"]) == ("pass", [])
    expected = {}
    for tag in ("", "nightly"):
        labels = tuple(sorted({"platform": PLATFORM, "collective": "all_reduce", "tag": tag, "ranks": "16"}.items()))
        expected |= {
            ("emuplan_series_peak_busbw_gbps", labels): round(PEAK * NOISE[7], 2),
            ("emuplan_series_average_busbw_gbps", labels): average_night_8,
            ("emuplan_series_latest_run_id", labels): ids[7],
            ("emuplan_series_verdict", tuple(sorted((*labels, ("verdict", stats["verdict"]["status"]))))): 1,
            ("emuplan_series_pct_of_expected", labels): pytest.approx(best_pct),
            ("emuplan_series_regression", labels): 0,  # night 8 is back within its band
        }
    assert _samples(answer.text) == expected | {("emuplan_metrics_series_dropped", ()): 0}


def test_verdict_and_pct_of_expected_are_exposed_once_known() -> None:
    latest = LatestInSeries("gb200-nvl72", "all_reduce", "", 72, 9, 846.82, 420.5, verdict="pass", pct_of_expected=94.1)
    labels = tuple(sorted({"platform": "gb200-nvl72", "collective": "all_reduce", "tag": "", "ranks": "72"}.items()))
    samples = _samples(b"".join(metrics_chunks([latest], 0)).decode())
    assert samples[("emuplan_series_verdict", tuple(sorted((*labels, ("verdict", "pass")))))] == 1
    assert samples[("emuplan_series_pct_of_expected", labels)] == 94.1


def test_metrics_need_a_viewer_unless_the_server_opens_them(database_url: str) -> None:
    for public, status in ((False, 401), (True, 200)):
        settings = Settings(database_url=database_url, demo=False, auth="accounts", metrics_public=public)
        with TestClient(create_app(settings)) as client:
            assert client.get("/metrics").status_code == status


def test_the_trend_page_leads_with_what_changed_and_keeps_its_filters_in_links(
    client: TestClient, database: Database
) -> None:
    ids = import_nights(database, 6)
    page = client.get("/trend", params={"sizes": str(GIB)})  # the newest run's platform and collective
    assert page.status_code == 200
    html = page.text
    assert html.index('id="what-changed"') < html.index('id="trend-filters"') < html.index('id="trend-charts"')
    assert "busbw at 1 GiB regression: -12.0 % from the median" in html
    row = html[html.index("<tbody>", html.index('id="what-changed-table"')) :].split("</tr>")[0]
    since_previous = f"{(262.12 - night_busbw(5)) / night_busbw(5) * 100:+.1f}"
    cells = [cell.split(">", 1)[1].split("<")[0] for cell in row.split("<td")[1:5]]
    assert cells == ["busbw at 1 GiB ", "262.12", since_previous, "-12.0"]
    assert '<span class="badge trend-regression">regression</span>' in row
    assert f'href="/runs/{ids[5]}"' in html
    query = f"platform={PLATFORM}&amp;collective=all_reduce&amp;sizes={GIB}"
    assert f'data-figures-url="/api/trend/figures?{query}"' in html
    assert f'href="/api/trend?{query}"' in html
    figures = client.get(f"/api/trend/figures?platform={PLATFORM}&sizes={GIB}").json()
    assert [figure["figure"] for figure in figures] == ["peak_busbw_gbps", "average_busbw_gbps", AT_GIB]
    marked = [trace for trace in figures[2]["plot"]["data"] if trace.get("name") == "regression"]
    assert [(trace["x"], trace["y"]) for trace in marked] == [(["2026-11-06T02:00:00+00:00"], [262.12])]


def test_the_trend_page_says_so_when_no_run_names_a_platform(client: TestClient) -> None:
    page = client.get("/trend")
    assert page.status_code == 200
    assert "No run names a platform yet" in page.text
    assert client.get("/trend", params={"platform": "h900"}).status_code == 404


def test_each_run_keeps_its_series_figures_beside_its_summary(database: Database) -> None:
    (run_id,) = import_nights(database, 1)
    with database.read_session() as session:
        stored = session.get(RunTrendFigures, run_id).figures
        from_summary = figures_of(session.get(Run, run_id).summary, 16)
    assert stored == from_summary
    assert stored["all_reduce"]["peak_busbw_gbps"] == PEAK
    assert stored["all_reduce"]["busbw_by_size"][str(GIB)] == BUSBW_AT_GIB[0]
    # A run stored before run_trend_figures existed is read from its summary, to the same figures.
    with database.writing() as session:
        session.delete(session.get(RunTrendFigures, run_id))
    with database.read_session() as session:
        (member,) = series_runs(session, PLATFORM)
    assert member.sweeps["all_reduce"].busbw_by_size[GIB] == BUSBW_AT_GIB[0]
    # Relabelling the run's collective relabels its figures in the same transaction.
    with database.writing() as session:
        relabel_collectives(session, run_id, {"all_reduce": "reduce_scatter"})
    with database.read_session() as session:
        assert list(session.get(RunTrendFigures, run_id).figures) == ["reduce_scatter"]
