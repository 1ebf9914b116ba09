"""Plotly figures from cached summaries: traces, exact marked percentiles, sizes, escaping."""

import base64
import json

import numpy as np
import pytest

from emuplan.charts import (
    bandwidth_figure,
    cdf_figure,
    comparison_cdf_figure,
    comparison_delay_figure,
    comparison_small_multiples,
    delay_figure,
)
from emuplan.results import parse_result_file, summarise
from emuplan.results.canonical import samples_table
from paths import SHARED_NCCL


def values(array) -> np.ndarray:
    """Plotly's typed-array JSON ({"dtype", "bdata"}) or a plain list, as numpy."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
    return np.asarray(array)


@pytest.fixture(scope="module")
def big_summary() -> dict:
    rng = np.random.default_rng(7)
    durations = rng.lognormal(np.log(14000.0), 0.1, 400_000)
    durations[[1000, 250_000]] = [5_000_000.0, 4_200_000.0]  # two multi-second spikes
    sizes = np.where(np.arange(400_000) % 2 == 0, 971048, 4239400)
    return summarise(samples_table(duration_us=durations, collective="all_reduce", size_bytes=sizes))


def test_cdf_has_one_capped_curve_per_group_and_exact_percentile_markers(big_summary):
    figure = cdf_figure(big_summary, log_x=True)
    curves = [t for t in figure["data"] if t["mode"] == "lines"]
    markers = [t for t in figure["data"] if t["mode"] == "markers"]
    assert [t["name"] for t in curves] == ["all_reduce · 971048 B", "all_reduce · 4239400 B"]
    assert all(t["type"] == "scatter" for t in figure["data"])  # SVG, not scattergl
    assert all(len(values(t["x"])) <= 2007 for t in curves)
    group = big_summary["groups"][0]
    assert markers[0]["text"] == ["p50", "p90", "p99", "p99.9", "max"]
    expected_ms = [group[k] / 1000 for k in ("p50_us", "p90_us", "p99_us", "p99_9_us", "max_us")]
    assert values(markers[0]["x"]) == pytest.approx(expected_ms, rel=1e-12)
    assert values(markers[0]["x"])[-1] == 5000.0  # the spike is the max, in ms
    assert figure["layout"]["xaxis"]["type"] == "log"
    assert figure["layout"]["xaxis"]["title"]["text"] == "completion time (ms)"
    assert len(json.dumps(figure)) < 300_000


def test_delay_keeps_spikes_and_splits_sizes_for_pipeline(big_summary):
    overlaid = delay_figure(big_summary)
    assert len(overlaid["data"]) == 2
    first = overlaid["data"][0]
    # 2000 points: the 200 trials above p99.9, each bucket's fastest and slowest, less the trials that are both.
    assert len(values(first["y"])) == 1821
    assert values(first["y"]).max() == pytest.approx(5000.0)  # ms: the 5 s spike survived downsampling
    panels = delay_figure(big_summary, per_size=True)
    assert [t["yaxis"] for t in panels["data"]] == ["y", "y2"]
    assert [a["text"] for a in panels["layout"]["annotations"]] == ["all_reduce · 971048 B", "all_reduce · 4239400 B"]


def test_comparison_delays_are_one_figure_with_a_panel_per_run_and_a_legend_entry_per_group(big_summary):
    small = summarise(samples_table(duration_us=np.array([10.0, 20.0]), collective="all_gather", size_bytes=None))
    figure = comparison_delay_figure([("#1 <b>big</b>", big_summary), ("#2 again", big_summary), ("#3 small", small)])
    layout = figure["layout"]
    # A panel per run, titled with the run (escaped), stacked in one column, each over its own iterations.
    assert [a["text"] for a in layout["annotations"]] == ["#1 &lt;b&gt;big&lt;/b&gt;", "#2 again", "#3 small"]
    assert [t["xaxis"] for t in figure["data"]] == ["x", "x", "x2", "x2", "x3"]
    assert [t["yaxis"] for t in figure["data"]] == ["y", "y", "y2", "y2", "y3"]
    assert [layout[f"xaxis{s}"]["domain"] for s in ("", "2", "3")] == [[0.0, 1.0]] * 3
    assert all("matches" not in layout[f"{axis}{s}"] for axis in ("xaxis", "yaxis") for s in ("2", "3"))
    assert [layout[f"yaxis{s}"]["title"]["text"] for s in ("", "2", "3")] == ["completion time (ms)"] * 3
    assert [layout[f"xaxis{s}"].get("title") for s in ("", "2", "3")] == [None, None, {"text": "iteration"}]
    # 160 px a panel, 64 px between panels: 3 × 160 + 2 × 64 = 608 px of plot, plus the title's 58, the x
    # axis title's 60 and the legend's band: 10 px of padding and a row of 19 a group (three groups).
    plot_px = 608
    assert layout["yaxis"]["domain"] == pytest.approx([1 - 160 / plot_px, 1.0], abs=1e-12)
    assert layout["yaxis3"]["domain"] == pytest.approx([0.0, 160 / plot_px], abs=1e-12)
    assert layout["margin"] == {"l": 60, "r": 32, "t": 58, "b": 60 + 10 + 3 * 19}
    assert layout["height"] == 58 + plot_px + 60 + 67
    assert layout["legend"] == {"orientation": "h", "yref": "container", "y": 67 / 793, "yanchor": "top",
                                "tracegroupgap": 0, "maxheight": 67}  # fmt: skip
    # A group has one colour and one legend entry across the panels.
    assert [t["name"] for t in figure["data"]] == ["all_reduce · 971048 B", "all_reduce · 4239400 B"] * 2 + [
        "all_gather · size unknown"
    ]
    assert [t["showlegend"] for t in figure["data"]] == [True, True, False, False, True]
    # Its colour is its size's (the smallest darkest, unknown grey), its dash its collective's.
    assert [(t["line"]["color"], t["line"]["dash"]) for t in figure["data"]] == [
        ("#440154", "solid"),
        ("#b5de2b", "solid"),
        ("#440154", "solid"),
        ("#b5de2b", "solid"),
        ("#7f7f7f", "dash"),
    ]
    assert [t["legendgroup"] for t in figure["data"]] == ["group-0", "group-1", "group-0", "group-1", "group-2"]
    # At most 250 points a series (a two-sample group keeps both): the slowest 62 of its 200 trials above p99.9 and
    # each bucket's fastest and slowest, less the trials that are both; both spikes of the first size drawn, in ms.
    assert [len(values(t["y"])) for t in figure["data"]] == [204, 202, 204, 202, 2]
    assert np.sort(values(figure["data"][0]["y"]))[-2:] == pytest.approx([4200.0, 5000.0])
    assert values(figure["data"][4]["y"]) == pytest.approx([0.010, 0.020])
    assert figure["data"][0]["hovertemplate"] == "iteration %{x}: %{y:.4g} ms"


def test_legend_hangs_below_the_axis_title_in_a_band_of_a_row_an_entry_added_to_the_height(big_summary):
    # A row of 19 px an entry (a phone's width holds one) and 10 px of padding, added to the margin and to
    # charts.js's default height of 420; the legend's top at the band's top, whatever rows it draws.
    overlaid = delay_figure(big_summary)
    band = 10 + 2 * 19
    assert overlaid["layout"]["legend"] == {"orientation": "h", "yref": "container", "y": band / (420 + band),
                                            "yanchor": "top", "tracegroupgap": 0, "maxheight": band}  # fmt: skip
    assert (overlaid["layout"]["margin"]["b"], overlaid["layout"]["height"]) == (60 + band, 420 + band)
    # The "off the axis" marks of a group with trials past the axis' end join the legend (the first size's
    # two spikes); a group with none gets no trace, which would take a row without an entry.
    clipped = delay_figure(big_summary, clip=True)
    assert [t["name"] for t in clipped["data"]] == [
        "all_reduce · 971048 B", "all_reduce · 4239400 B", "all_reduce · 971048 B: off the axis (value…",
    ]  # fmt: skip
    assert clipped["layout"]["margin"]["b"] == 60 + 10 + 3 * 19
    # A figure of one trace has no legend (Plotly shows none), so no band.
    cdf = cdf_figure(summarise(samples_table(duration_us=np.array([10.0, 20.0]), collective="all_gather")))
    assert "legend" in cdf["layout"]  # the curve and its percentile markers: two traces, one entry
    assert cdf["layout"]["margin"]["b"] == 60 + 10 + 19
    # Past 8 entries the band stops growing and the legend scrolls in it: 12 sizes, 8 rows.
    sizes = np.repeat(2 ** np.arange(12), 3)
    many = delay_figure(summarise(samples_table(duration_us=np.arange(36.0) + 1, collective="all_reduce",
                                                size_bytes=sizes)))  # fmt: skip
    assert len(many["data"]) == 12
    assert (many["layout"]["margin"]["b"], many["layout"]["legend"]["maxheight"]) == (60 + 162, 10 + 8 * 19)


def test_every_legend_entry_is_cut_to_the_same_length_and_escaped():
    name = "<b>" + "x" * 60
    summary = summarise(samples_table(duration_us=np.array([10.0, 20.0]), collective=name, size_bytes=None))
    legend = "&lt;b&gt;" + "x" * 40 + "…"  # 44 characters before escaping: 3 of the tag, 40 x, the ellipsis
    assert cdf_figure(summary)["data"][0]["name"] == legend
    assert delay_figure(summary)["data"][0]["name"] == legend
    assert comparison_cdf_figure([(name, summary)])["data"][0]["name"] == legend
    # The percentile markers stay out of the legend: their hover names the whole group.
    assert cdf_figure(summary)["data"][1]["hovertemplate"].endswith(
        f"<extra>&lt;b&gt;{'x' * 60} · size unknown</extra>"
    )


def test_bandwidth_vs_size_from_nccl_tests():
    parsed = parse_result_file((SHARED_NCCL / "v100-12gpu-allreduce-pre2.13.txt").read_bytes(), "allreduce.txt")
    figure = bandwidth_figure(summarise(parsed.samples, ranks=parsed.ranks))
    names = [t["name"] for t in figure["data"]]
    assert names == [
        "all_reduce out-of-place algbw", "all_reduce out-of-place busbw",
        "all_reduce in-place algbw", "all_reduce in-place busbw",
    ]  # fmt: skip
    busbw = figure["data"][1]
    assert values(busbw["x"])[-1] == 8589934592
    assert round(float(values(busbw["y"])[-1]), 2) == 123.56  # nccl-tests printed 123.56
    assert figure["layout"]["xaxis"]["type"] == "log"


def test_comparison_figures_and_escaping(big_summary):
    small = summarise(samples_table(duration_us=np.array([10.0, 20.0]), collective="all_gather", size_bytes=None))
    runs = [("#1 <script>alert(1)</script>", big_summary), ("#2 small", small)]
    overlaid = comparison_cdf_figure(runs)
    text = json.dumps(overlaid)
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert [t["name"] for t in overlaid["data"] if t["mode"] != "markers"] == [
        "#1 &lt;script&gt;alert(1)&lt;/script&gt;",
        "#2 small",
    ]
    # The legend (a run an entry) sits at the figure's bottom edge in a margin of its own, below the axis title.
    assert overlaid["layout"]["legend"] == {"orientation": "h", "yref": "container", "y": 48 / 468,
                                            "yanchor": "top", "tracegroupgap": 0, "maxheight": 48}  # fmt: skip
    assert overlaid["layout"]["margin"]["b"] == 60 + 10 + 2 * 19  # two runs: two rows
    panels = comparison_small_multiples(runs, log_x=True)
    assert len(panels["data"]) == 3  # two groups in run 1, one in run 2
    # One x title, under the bottom row's first panel: narrow panels' titles would run together.
    assert [panels["layout"][axis].get("title") for axis in ("xaxis", "xaxis2")] == [
        {"text": "completion time (ms)"},
        None,
    ]
    assert "<script>" not in json.dumps(panels)
    assert [t["xaxis"] for t in panels["data"]] == ["x", "x", "x2"]
    # A group has one colour and one legend entry across the panels (the second run's all_gather is its own
    # group); the legend sits below the panels in rows of its own, which the figure's height adds.
    assert [(t["name"], t["line"]["color"], t["legendgroup"], t["showlegend"]) for t in panels["data"]] == [
        ("all_reduce · 971048 B", "#440154", "group-0", True),
        ("all_reduce · 4239400 B", "#b5de2b", "group-1", True),
        ("all_gather · size unknown", "#7f7f7f", "group-2", True),
    ]
    assert panels["layout"]["legend"] == {"orientation": "h", "yref": "container", "y": 67 / 387,
                                          "yanchor": "top", "tracegroupgap": 0, "maxheight": 67}  # fmt: skip
    assert [panels["layout"]["margin"]["b"], panels["layout"]["height"]] == [60 + 67, 320 + 67]
    again = comparison_small_multiples([runs[0], ("#2 big again", big_summary)])
    assert [(t["legendgroup"], t["line"]["color"], t["showlegend"]) for t in again["data"]] == [
        ("group-0", "#440154", True),
        ("group-1", "#b5de2b", True),
        ("group-0", "#440154", False),
        ("group-1", "#b5de2b", False),
    ]
    # The shared y axis is labelled in the first column only; automargin makes room for every tick label, so
    # Plotly need not measure each to hide those past the chart's edge.
    assert [panels["layout"]["yaxis"].get("showticklabels"), panels["layout"]["yaxis2"]["showticklabels"]] == [
        None,
        False,
    ]
    axes = [axis for key, axis in panels["layout"].items() if key[1:5] == "axis"]
    assert [(axis["automargin"], axis["ticklabeloverflow"]) for axis in axes] == [(True, "allow")] * 4
    # Two columns leave 24 characters a title; a longer one is cut (never inside an HTML entity), whole on hover.
    titles = panels["layout"]["annotations"]
    assert [a["text"] for a in titles] == ["#1 &lt;script&gt;alert(1)&lt;/sc…", "#2 small"]
    long_name = "#3 Demo pipeline parallel (generated, 4 GPUs, 100 Gbit/s)"
    three = comparison_small_multiples([*runs, (long_name, small)])["layout"]["annotations"]
    assert three[2]["text"] == "#3 Demo pipelin…"  # 16 characters a title in three columns (a phone's)
    assert [three[0]["font"], panels["layout"]["xaxis2"]["nticks"]] == [{"size": 11}, 2]
    assert three[2]["hovertext"] == long_name
    # Small panels thin the body of a curve but keep its min and its tail from p99 on, point for point: of
    # the 2005 grid points every 11th (183), the 22 from p99 on, 2 of them both.
    group, grid = big_summary["groups"][0], big_summary["ecdf"][0]
    thinned = values(panels["data"][0]["x"])
    tail = [x for x, p in zip(grid["x"], grid["p"], strict=True) if p >= 0.99]
    assert (len(grid["x"]), len(tail), len(thinned)) == (2005, 22, 183 + 22 - 2)
    assert thinned[-len(tail) :] == pytest.approx(np.array(tail, dtype=np.float32) / 1000)
    assert values(panels["data"][0]["y"])[-len(tail) :].tolist() == pytest.approx(grid["p"][-len(tail) :])
    assert [thinned[0], thinned[-1]] == pytest.approx([group["min_us"] / 1000, group["max_us"] / 1000])
    # The overlay: every 6th point of each run's body (335), its whole tail from p99 on (22, 4 shared).
    overall = big_summary["overall_ecdf"]
    curve = values(overlaid["data"][0]["x"])
    overall_tail = [x for x, p in zip(overall["x"], overall["p"], strict=True) if p >= 0.99]
    assert (len(overall["x"]), len(overall_tail), len(curve)) == (2005, 22, 335 + 22 - 4)
    assert curve[-len(overall_tail) :] == pytest.approx(np.array(overall_tail, dtype=np.float32) / 1000)
    assert [curve[0], curve[-1]] == pytest.approx(
        [big_summary["overall"]["min_us"] / 1000, big_summary["overall"]["max_us"] / 1000]
    )


def test_long_titles_break_into_escaped_lines_with_room_above_the_plot(big_summary):
    short = delay_figure(big_summary, title="Completion time per iteration")
    assert short["layout"]["title"]["text"] == "Completion time per iteration"
    assert short["layout"]["margin"]["t"] == 58
    long = delay_figure(big_summary, title="Completion time per <b>iteration</b> of every run compared here")
    # Broken at words within 32 characters of the raw text (a phone's chart holds a line), then escaped.
    assert long["layout"]["title"]["text"] == (
        "Completion time per<br>&lt;b&gt;iteration&lt;/b&gt; of every run<br>compared here"
    )
    assert long["layout"]["margin"]["t"] == 36 + 22 * 3


def test_a_clipped_delay_chart_labels_the_slowest_trials_past_the_axis_and_shows_every_ones_on_hover():
    durations = np.random.default_rng(8).lognormal(np.log(100.0), 0.05, 200_000).round(3)
    spikes = np.arange(1_000, 200_000, 2_000)  # 100 spikes of 1,000 to 1,099 µs, the slowest last
    durations[spikes] = 1_000.0 + np.arange(100)
    summary = summarise(samples_table(duration_us=durations, collective="all_reduce", size_bytes=np.full(200_000, 8)))
    marks = delay_figure(summary, clip=True)["data"][1]
    assert marks["x"] == spikes.tolist()
    assert marks["customdata"] == pytest.approx(durations[spikes].tolist())
    assert marks["hovertemplate"].startswith("iteration %{x}: %{customdata:.4g} µs")
    assert [text for text in marks["text"] if text] == [f"{1_000 + n} µs" for n in range(80, 100)]
