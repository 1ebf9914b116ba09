"""A series over time (results.analysis.trend): each run against the robust noise band of the runs before it."""

from datetime import UTC, datetime, timedelta

import pytest

from emuplan.results.analysis.trend import SeriesPoint, figure_label, judge_series, what_changed

NIGHT = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
# Eight nights of busbw at 1 GiB (GB/s) with run-to-run noise of about ±1 %; the sixth lost 12 %.
NOISE = [1.000, 1.008, 0.994, 1.003, 0.997, 0.880, 1.005, 0.999]


def _series(factors: list[float], base: float = 400.0) -> list[SeriesPoint]:
    return [
        SeriesPoint(run_id=index + 1, name=f"nightly {index + 1}", measured_at=NIGHT + timedelta(days=index),
                    figures={"busbw_gbps@1073741824": base * factor, "peak_busbw_gbps": 450.0 * NOISE[index % 5]})
        for index, factor in enumerate(factors)
    ]  # fmt: skip


def test_the_night_that_lost_12_percent_is_flagged_and_no_other() -> None:
    judged = judge_series(_series(NOISE))
    statuses = [entry["status"] for entry in judged["busbw_gbps@1073741824"]]
    assert statuses == ["no band"] + ["within"] * 4 + ["regression", "within", "within"]
    sixth = judged["busbw_gbps@1073741824"][5]
    # The band of night 6: the median of nights 1-5 (400 × 1.000) ± max(3 × 1.4826 × MAD, 5 % of it).
    assert sixth["median"] == pytest.approx(400.0)
    assert (sixth["low"], sixth["high"]) == pytest.approx((380.0, 420.0))
    assert sixth["change_pct"] == pytest.approx(-12.0)
    assert {entry["status"] for entry in judged["peak_busbw_gbps"]} <= {"no band", "within"}


def test_a_second_run_that_lost_half_its_peak_is_a_regression_with_one_run_before_it() -> None:
    """No history of noise is needed to see a halving: from the second run on the band is the runs before
    it ± 5 % (the MAD of one run says nothing)."""
    points = [
        SeriesPoint(run_id=4, name="first", measured_at=NIGHT, figures={"peak_busbw_gbps": 472.0}),
        SeriesPoint(run_id=5, name="second", measured_at=NIGHT + timedelta(days=1), figures={"peak_busbw_gbps": 220.4}),
    ]
    judged = judge_series(points)
    assert [entry["status"] for entry in judged["peak_busbw_gbps"]] == ["no band", "regression"]
    changed = what_changed(judged)
    assert (changed["run_id"], changed["quiet"]) == (5, False)
    assert changed["summary"] == "peak busbw regression: -53.3 % from the median"
    # The first run alone has nothing to be quiet against, and says so.
    assert what_changed(judge_series(points[:1]))["summary"] == (
        "run #4 is the series' first: nothing before it to compare it with yet"
    )
    # A move inside ± 5 % of the one run before is no regression, and the headline says quiet.
    points[1] = SeriesPoint(
        run_id=5, name="second", measured_at=points[1].measured_at, figures={"peak_busbw_gbps": 460}
    )
    assert what_changed(judge_series(points))["quiet"] is True


def test_what_changed_leads_with_the_regression_and_says_so() -> None:
    changed = what_changed(judge_series(_series(NOISE[:6])))
    assert changed["run_id"] == 6
    assert changed["previous_run_id"] == 5
    assert not changed["quiet"]
    first = changed["changes"][0]
    assert (first["figure"], first["status"]) == ("busbw_gbps@1073741824", "regression")
    assert first["change_since_previous_pct"] == pytest.approx((0.880 - 0.997) / 0.997 * 100)
    assert changed["summary"] == "busbw at 1 GiB regression: -12.0 % from the median"


def test_a_quiet_night_says_so_in_one_line() -> None:
    changed = what_changed(judge_series(_series(NOISE[:5])))
    assert changed["quiet"]
    assert changed["summary"] == "quiet: run #5 stays within the noise band of the runs before it on every figure"


def test_a_run_that_got_faster_is_an_improvement() -> None:
    judged = judge_series(_series([1.0, 1.01, 0.99, 1.0, 1.2]))
    assert judged["busbw_gbps@1073741824"][-1]["status"] == "improvement"


def test_one_slow_night_does_not_widen_the_band_of_the_nights_after_it() -> None:
    # A mean and standard deviation around night 6's 0.5 would let night 7's 10 % loss pass; the median and
    # MAD of nights 1-6 do not move.
    judged = judge_series(_series([1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.9]))
    assert [e["status"] for e in judged["busbw_gbps@1073741824"]][-2:] == ["regression", "regression"]


def test_a_series_without_runs_has_nothing_to_say() -> None:
    assert what_changed(judge_series([]))["summary"] == "no runs yet"


def test_figures_are_named_for_readers() -> None:
    assert [figure_label(name) for name in ("peak_busbw_gbps", "average_busbw_gbps", "busbw_gbps@1073741824")] == [
        "peak busbw", "average busbw", "busbw at 1 GiB",
    ]  # fmt: skip
    assert figure_label("busbw_gbps@3145728") == "busbw at 3 MiB"


def test_the_robust_sigma_is_scipys_normal_scaled_mad() -> None:
    from scipy.stats import median_abs_deviation

    history = [297.86, 300.24, 296.07, 298.75, 296.97, 262.12, 299.35]
    expected = median_abs_deviation(history, scale="normal")
    judged = judge_series(_series([value / 400.0 for value in history] + [1.0], base=400.0), mad_k=10.0, min_change=0.0)
    last = judged["busbw_gbps@1073741824"][-1]
    assert last["high"] - last["median"] == pytest.approx(10.0 * expected)
