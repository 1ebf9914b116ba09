"""Plotly figures from cached run summaries (``results.analysis.stats.summarise``), as JSON-able dicts.

Every figure is built from the ECDF grids and delay series cached at import, so no figure reads a run's
samples. Figures are plain dicts of JSON types, written directly in Plotly's figure schema: passing them
through ``plotly.graph_objects`` to validate them took 5-15 times as long as building them (~90 ms of a
five-run comparison) and cost the server ~0.1 s of imports and ~27 MB, so the tests validate instead
(tests/api/test_figure_schema.py checks every figure the API serves with ``plotly.graph_objects.Figure``).
Traces are SVG ``scatter`` (pages show many charts; WebGL contexts are limited), curves travel as
float32 typed arrays (``typed_array``), and every string that came from a user or a file is
HTML-escaped, because Plotly renders a subset of HTML in names, titles and hover text.
"""

import base64
import html
import textwrap
from enum import StrEnum

import numpy as np

from emuplan.charts.palette import (
    ALERT_COLOR,
    REFERENCE_COLOR,
    TYPICAL_COLOR,
    UNKNOWN_SIZE_COLOR,
    group_styles,
    kind_marker,
    run_style,
)
from emuplan.results.analysis.run_analysis import file_or_ours, page_time_unit, time_unit
from emuplan.results.analysis.stats import PERCENTILES, delay_series


class FigureKind(StrEnum):
    """The figures of one run (``/api/runs/{id}/figures/{kind}``)."""

    CDF = "cdf"
    DELAY = "delay"
    BANDWIDTH = "bandwidth"
    # Size sweeps only (a run's stored kind): busbw and algbw against size with the α-β curve. CDF and DELAY
    # are the distributions' only.
    SWEEP = "sweep"
    # Files that time every rank: each rank's (host's) time × the median rank's (host's).
    RANKS = "ranks"
    HOSTS = "hosts"


MARKED_PERCENTILES = ("p50", "p90", "p99", "p99_9")
PERCENTILE_LABELS = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p99_9": "p99.9"}


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def typed_array(values) -> dict | list:
    """Values as Plotly's typed-array JSON, ``{"dtype": "f4", "bdata": base64 of little-endian float32}``
    (what plotly.py sends for a float32 numpy array): a third of the bytes of decimal text, and no
    float formatting per point. An empty array stays a list, as plotly.py leaves it."""
    array = np.ascontiguousarray(values, dtype="<f4")
    if not array.size:
        return []
    return {"dtype": "f4", "bdata": base64.b64encode(array).decode("ascii")}


def _time_unit(summaries: list[dict]) -> tuple[str, float]:
    """(unit, scale from µs) for the typical completion of these runs: the unit their tables use too."""
    unit, us_per_unit = page_time_unit(summaries)
    return unit, 1.0 / us_per_unit


PANEL_GAP = 0.05
# Axes drawn the way plotly_white draws them, without shipping (and validating) a whole template with
# every figure: the template was most of a figure's build time and ~10 KB of its JSON. automargin makes room
# for every tick label, so none can run past the chart's edge: Plotly's default check for that
# (ticklabeloverflow "hide past div" measures every label's box) was a quarter of the compare page's drawing.
_AXIS_STYLE = {
    "gridcolor": "#e5ecf6", "zerolinecolor": "#e5ecf6", "linecolor": "#c8d4e3", "automargin": True,
    "ticklabeloverflow": "allow",
}  # fmt: skip


def _axis(title: str | None, **options) -> dict:
    return {**_AXIS_STYLE, **({"title": {"text": title}} if title else {}), **options}


# A title says what the chart shows (the page names the run); a line of it fits a phone's chart (~340 px at
# Plotly's 17 px title font), so no title needs shrinking in the browser.
TITLE_LINE_CHARS = 32


def _title_lines(title: str) -> list[str]:
    """The title broken at word boundaries, each line escaped (Plotly joins lines at ``<br>``)."""
    return [escape(line) for line in textwrap.wrap(title, TITLE_LINE_CHARS)] or [""]


def _figure(traces: list, title: str, x_title: str, y_title: str | None, *, log_x: bool = False, **layout) -> dict:
    """The figure: ``traces`` on the house axes (plotly_white's look, set here rather than by a template),
    with the legend below the x axis title (``_legend_below``) when Plotly shows one (more than one trace)."""
    title_lines = _title_lines(title)
    base = {
        # Pinned to the top so panel labels just above the plot area never run into a long title.
        "title": {"text": "<br>".join(title_lines), "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 12}},
        "xaxis": _axis(x_title, type="log" if log_x else "linear"),
        "yaxis": _axis(y_title),
        "margin": {"l": 60, "r": RIGHT_MARGIN_PX, "t": _top_margin(title_lines), "b": 60},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
    }
    figure = {"data": traces, "layout": {**base, **layout}}
    if len(traces) > 1:
        _legend_below(figure, sum(1 for trace in traces if trace.get("showlegend", True)))
    return figure


# Room for half the last x tick label ("50k", "100") past the plot's right edge: when automargin has to
# widen a margin, Plotly draws the whole figure a second time (20 px did, by 1 px, for a log axis's "100").
RIGHT_MARGIN_PX = 32


def _top_margin(title_lines: list[str]) -> int:
    return 36 + 22 * len(title_lines)


# Characters a panel title may take per column before it runs into its neighbour's on a phone (390 px:
# three panels of ~95 px, at the titles' 11 px font). The comparison page cuts the whole title (the hover's)
# again to the width its panels really have (charts.js, fitPanelTitles).
PANEL_TITLE_CHARS = 48
PANEL_TITLE_FONT = {"size": 11}
PANEL_X_TICKS = 2
# Characters of a legend entry that fit a phone's width beside its symbol: Plotly neither wraps nor cuts
# an entry, so a longer name (a run's, a file's collective) ran off the chart's right edge.
LEGEND_NAME_CHARS = 44


def _shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (before escaping, so never inside an entity)."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _legend_name(text: str) -> str:
    """A trace's name as its legend entry shows it: cut to ``LEGEND_NAME_CHARS``, escaped. Every chart's
    page lists the whole name in its tables (the run's statistics and sweep tables, the comparison's)."""
    return escape(_shortened(text, LEGEND_NAME_CHARS))


def _panel_title(text: str, columns: int) -> str:
    """The title shortened to its panel's width; the whole text stays in the hover."""
    return _shortened(text, PANEL_TITLE_CHARS // columns)


def _panels(
    titles: list[str], columns: int, x_title: str, y_title: str, *, log_x: bool, share_y: bool,
    share_x: bool = True, row_gap: float = 2 * PANEL_GAP,
) -> tuple[dict, list[str]]:  # fmt: skip
    """Axes for a grid of panels sharing the x axis (unless not ``share_x``) and the y axis if ``share_y``:
    a cheap make_subplots. ``row_gap``: the space between rows, a fraction of the plot area's height.
    Returns the layout entries and, per panel, the suffix its traces use ("", "2", …)."""
    rows = -(-len(titles) // columns)
    width = (1 - PANEL_GAP * (columns - 1)) / columns
    height = (1 - row_gap * (rows - 1)) / rows
    layout, annotations, suffixes = {}, [], []
    # Few ticks a panel: three panels side by side on a phone are ~95 px wide each. Plotly labels a log axis
    # by decades only once they are at least 0.7 × its span ÷ nticks apart; with more ticks asked for, two
    # decades got 1 2 5 10 2 5 100, which ran together.
    x_ticks = {"nticks": PANEL_X_TICKS} if columns > 1 else {}
    for index, text in enumerate(titles):
        row, column = divmod(index, columns)
        suffix = "" if index == 0 else str(index + 1)
        left, top = column * (width + PANEL_GAP), 1 - row * (height + row_gap)
        x_shared = {"matches": "x"} if index and share_x else {}
        # A shared y axis is labelled once a row: the same labels again only crowd a phone's narrow panels.
        y_shared = {"matches": "y", **({"showticklabels": False} if column else {})} if index and share_y else {}
        # One x title, under the bottom row's first panel: side by side, narrow panels' titles run together.
        bottom_left = row == rows - 1 and column == 0
        layout[f"xaxis{suffix}"] = _axis(x_title if bottom_left else None, type="log" if log_x else "linear",
                                         domain=[left, left + width], anchor=f"y{suffix}", **x_ticks,
                                         **x_shared)  # fmt: skip
        layout[f"yaxis{suffix}"] = _axis(y_title if column == 0 else None, domain=[max(0.0, top - height), top],
                                         anchor=f"x{suffix}", **y_shared)  # fmt: skip
        annotations.append({"text": escape(_panel_title(text, columns)), "hovertext": escape(text),
                            "font": PANEL_TITLE_FONT, "x": left + width / 2, "y": top, "xref": "paper", "yref": "paper",
                            "xanchor": "center", "yanchor": "bottom", "showarrow": False})  # fmt: skip
        suffixes.append(suffix)
    layout["annotations"] = annotations
    return layout, suffixes


def _scatter(**properties) -> dict:
    """A ``scatter`` trace: ``properties`` named as ``plotly.graph_objects.Scatter`` takes them."""
    return {"type": "scatter", **properties}


# Below this many points a curve also gets markers: a one-sample group would otherwise draw nothing.
SPARSE_POINTS = 50


def _curve(
    x: list, y: list, name: str, *, x_scale: float = 1.0, y_scale: float = 1.0, shape: str = "hv",
    legendgroup: str | None = None, color: str | None = None, dash: str = "solid", y_limit: float | None = None,
) -> dict:  # fmt: skip
    """A line trace; with ``y_limit``, every point above it is drawn at it (``_clipped_marks`` labels them)."""
    y_values = np.asarray(y, dtype=np.float32) * np.float32(y_scale)
    if y_limit is not None:
        y_values = np.minimum(y_values, np.float32(y_limit))
    return _scatter(
        x=typed_array(np.asarray(x, dtype=np.float32) * np.float32(x_scale)),
        y=typed_array(y_values),
        mode="lines" if len(x) > SPARSE_POINTS else "lines+markers",
        line={"shape": shape, "dash": dash, **({"color": color} if color else {})},
        name=_legend_name(name),
        **({"legendgroup": legendgroup} if legendgroup else {}),
    )


def _percentile_markers(stats: dict, name: str, scale: float, unit: str, legendgroup: str, color: str):
    marks = [m for m in MARKED_PERCENTILES if stats.get(f"{m}_us") is not None]
    x = [stats[f"{m}_us"] * scale for m in marks] + [stats["max_us"] * scale]
    y = [PERCENTILES[m] / 100.0 for m in marks] + [1.0]
    labels = [PERCENTILE_LABELS[m] for m in marks] + ["max"]
    return _scatter(
        x=x,
        y=y,
        mode="markers",
        text=labels,
        marker={"size": 7, "symbol": "diamond", "color": color},
        name=escape(f"{name} percentiles"),
        legendgroup=legendgroup,
        showlegend=False,
        hovertemplate=f"%{{text}}: %{{x:.4g}} {unit}<extra>{escape(name)}</extra>",
    )


def cdf_figure(summary: dict, *, title: str = "Completion-time CDF", log_x: bool = False) -> dict:
    """One ECDF curve per (collective, size, variant) with p50/p90/p99/p99.9 and max marked, in its size's colour
    (``palette.group_styles``)."""
    unit, scale = _time_unit([summary])
    styles = group_styles(summary["groups"])
    traces = []
    for index, (group, grid) in enumerate(zip(summary["groups"], summary["ecdf"], strict=True)):
        style, legendgroup = styles[group["label"]], f"group-{index}"
        traces.append(_curve(grid["x"], grid["p"], group["label"], x_scale=scale, legendgroup=legendgroup, **style))
        traces.append(_percentile_markers(group, group["label"], scale, unit, legendgroup, style["color"]))
    if "flows" in summary:
        flows = summary["flows"]
        traces.append(_curve(flows["ecdf"]["x"], flows["ecdf"]["p"], "flow completion (per flow)", x_scale=scale,
                             color=UNKNOWN_SIZE_COLOR, dash="dot"))  # fmt: skip
    return _figure(
        traces, title, f"completion time ({unit})", "fraction of completions ≤ x", log_x=log_x,
        yaxis=_axis("fraction of completions ≤ x", range=[0, 1.02]),
    )  # fmt: skip


def delay_figure(
    summary: dict,
    *,
    title: str = "Completion time per iteration",
    per_size: bool = False,
    log_y: bool = False,
    clip: bool = False,
) -> dict:
    """Completion time per iteration (``results.analysis.stats.delay_series``: every trial above p99.9 and each bucket's
    fastest and slowest); one panel per data size when
    ``per_size`` (pipeline runs: one all-reduce per layer) and there is more than one size.

    ``log_y`` puts time on a log axis, so one spike does not flatten the other trials; ``clip`` ends the
    axis at the largest p99.9 of the groups (``_clip_limit``) and draws each trial above it on the edge,
    labelled with its time."""
    unit, scale = _time_unit([summary])
    groups = list(zip(summary["groups"], summary["delay"], strict=True))
    styles = group_styles(summary["groups"])
    y_title = f"completion time ({unit})"
    if per_size and len(groups) > 1:
        # Each size keeps its own y range: a spike in one panel must not flatten the others.
        panels, suffixes = _panels([group["label"] for group, _ in groups], 1, "iteration", unit, log_x=False,
                                   share_y=False)  # fmt: skip
        traces = [
            _curve(series["x"], series["y"], group["label"], y_scale=scale, shape="linear", **styles[group["label"]])
            | {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
            for (group, series), suffix in zip(groups, suffixes, strict=True)
        ]
        return _figure(traces, title, "iteration", None, **panels, height=max(400, 180 * len(groups)))
    yaxis = _axis(y_title, type="log" if log_y else "linear")
    top = None
    if clip:
        # The axis ends a little above the percentile; only trials past its end are drawn on the edge.
        limit_name, limit = _clip_limit([group for group, _ in groups])
        top = limit * scale * CLIP_HEADROOM
        yaxis["title"] = {"text": f"{y_title}, axis ends at {CLIP_HEADROOM:g} × {limit_name}"}
        low = min(group["min_us"] for group, _ in groups) * scale
        yaxis["range"] = [float(np.log10(max(low, 1e-9))), float(np.log10(top))] if log_y else [0, top]
    traces = [_curve(series["x"], series["y"], group["label"], y_scale=scale, shape="linear", y_limit=top,
                     **styles[group["label"]]) for group, series in groups]  # fmt: skip
    if clip:
        # Only groups with trials past the axis' end: an empty trace has no legend entry, but would take a
        # row of the legend's band.
        marks = [_clipped_marks(series, top, scale, unit, f"{group['label']}: off the axis")
                 for group, series in groups]  # fmt: skip
        traces += [trace for trace in marks if trace["x"]]
    return _figure(traces, title, "iteration", y_title, yaxis=yaxis)


# The height charts.js gives a figure that brings none.
CHART_PX = 420
# One legend row (an entry's 19 px) and the legend's padding above and below its rows; past this many
# rows the legend scrolls in its band (a sweep compared with a run has ~60 groups).
LEGEND_ROW_PX = 19
LEGEND_PAD_PX = 10
LEGEND_MAX_ROWS = 8


def _legend_below(figure: dict, entries: int) -> None:
    """The legend in a band of its own added below the x axis title, not over it (a paper-relative legend
    met the title once a few long labels or a phone's width shortened the plot): a row an entry, as on a
    phone, where a chart is ~340 px wide and a typical entry (~200 px) fills a row; a wider slot puts
    several entries in a row and leaves the rest of the band blank.

    The legend hangs from the band's top (``yanchor`` top): Plotly then reserves the band's height whatever
    the number of rows it draws, so its automargin never widens the margin and draws the figure a second
    time (a legend standing on the bottom edge reserves its own height, which grows with the rows a narrow
    chart needs). Legend groups get no gap of their own: every row is the same height. More entries than
    ``LEGEND_MAX_ROWS`` scroll in a band of that many rows (``maxheight``)."""
    layout = figure["layout"]
    band = LEGEND_PAD_PX + LEGEND_ROW_PX * min(entries, LEGEND_MAX_ROWS)
    layout["margin"]["b"] += band
    layout["height"] = layout.get("height", CHART_PX) + band
    layout["legend"] = {"orientation": "h", "yref": "container", "y": band / layout["height"], "yanchor": "top",
                        "tracegroupgap": 0, "maxheight": band}  # fmt: skip


CLIP_HEADROOM = 1.2


def _clip_limit(groups: list[dict]) -> tuple[str, float]:
    """The largest p99.9 of the groups; under 1000 trials the nearest-rank p99.9 is the maximum itself,
    so p99 is used and named."""
    if all(group["p99_9_us"] < group["max_us"] for group in groups):
        return "p99.9", max(group["p99_9_us"] for group in groups)
    return "p99", max(group["p99_us"] for group in groups)


# Trials past a clipped axis' end labelled with their time, the slowest first; the others show it on hover. A huge
# run draws up to its series' points past the end (every bucket's slowest is a spike there): thousands of
# overlapping labels said nothing and took most of the figure's drawing.
CLIPPED_LABELS = 20


def _clipped_marks(series: dict, limit: float, scale: float, unit: str, name: str) -> dict:
    y = np.asarray(series["y"], dtype=np.float64) * scale
    above = np.flatnonzero(y > limit)
    labelled = set(above[np.argsort(-y[above], kind="stable")[:CLIPPED_LABELS]].tolist())
    return _scatter(
        x=np.asarray(series["x"])[above].tolist(),
        y=[limit] * len(above),
        mode="markers+text",
        text=[f"{y[i]:.4g} {unit}" if i in labelled else "" for i in above],
        customdata=y[above].tolist(),
        textposition="bottom center",
        marker={"symbol": "triangle-up", "size": 9, "color": ALERT_COLOR},
        name=_legend_name(f"{name} (value shown)"),
        hovertemplate=f"iteration %{{x}}: %{{customdata:.4g}} {unit}<extra>{escape(name)}</extra>",
    )


def _size_ticks(sizes: list[int]) -> dict:
    """Powers of two across the sizes, labelled in B / KiB / MiB / GiB, at most ~8 of them."""
    low, high = int(np.floor(np.log2(min(sizes)))), int(np.ceil(np.log2(max(sizes))))
    step = max(1, -(-(high - low) // 8))
    powers = list(range(low, high + 1, step))
    units = ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B"))
    labels = []
    for power in powers:
        shift, name = next((shift, name) for shift, name in units if power >= shift)
        labels.append(f"{2 ** (power - shift)} {name}")
    return {"tickvals": [2**power for power in powers], "ticktext": labels}


def sweep_figure(sweep: dict, *, title: str = "Bandwidth vs data size") -> dict:
    """busbw (solid) and algbw (dotted) against size on a log-2 axis per collective and variant, the α-β
    expected busbw (dashed) for the page's assumptions, and the line-rate ceiling."""
    traces, sizes = [], []
    for index, entry in enumerate(sweep["collectives"]):
        color = run_style(index)["color"]  # one run: its collectives take the run colours
        for table in entry["tables"]:
            rows = table["rows"]
            x = [row["size_bytes"] for row in rows]
            sizes += x
            name = " ".join(part for part in (entry["collective"], table["variant"]) if part)
            dash = "solid" if table["variant"] != "in-place" else "dashdot"
            traces.append(_scatter(x=x, y=[row["busbw_gbps"] for row in rows], mode="lines+markers",
                                   name=_legend_name(f"{name} busbw"),
                                   line={"color": color, "dash": dash}))  # fmt: skip
            traces.append(_scatter(x=x, y=[row["algbw_gbps"] for row in rows], mode="lines",
                                   name=_legend_name(f"{name} algbw"), line={"color": color, "dash": "dot", "width": 1},
                                   visible="legendonly"))  # fmt: skip
        rows = entry["tables"][0]["rows"]
        if any(row["expected_busbw_gbps"] is not None for row in rows):
            traces.append(_scatter(x=[row["size_bytes"] for row in rows],
                                     y=[row["expected_busbw_gbps"] for row in rows], mode="lines",
                                     name=_legend_name(f"{entry['collective']} expected busbw"),
                                     line={"color": color, "dash": "dash", "width": 1.5}))  # fmt: skip
    ceiling = sweep["ceiling_gbps"]
    if sizes and ceiling is not None:
        traces.append(_scatter(x=[min(sizes), max(sizes)], y=[ceiling, ceiling], mode="lines",
                               name=f"line rate {ceiling:.4g} GB/s",
                               line={"color": REFERENCE_COLOR, "width": 1}))  # fmt: skip
    ticks = _size_ticks(sizes) if sizes else {}
    return _figure(
        traces, title, "data size (bytes, log 2 scale)", "bandwidth (GB/s, 1 GB = 1e9 B)",
        xaxis=_axis("data size (bytes, log 2 scale)", type="log", **ticks),
    )  # fmt: skip


def straggler_figure(stragglers: dict, by: FigureKind, *, title: str) -> dict:
    """One bar per rank (or host): its summed time ÷ the median rank's (host's) over the same calls, the
    slowest in red, a dashed line at 1 (the median); the hover has its mean time and the time it lost."""
    entries = stragglers["ranks"] if by == FigureKind.RANKS else stragglers["hosts"]
    kind = stragglers["unit"] if by == FigureKind.RANKS else "host"
    headline = stragglers["slowest_rank"] if by == FigureKind.RANKS else stragglers["slowest_host"]
    slowest = headline["name"] if headline else None
    unit, per_unit = time_unit(max(entry["mean_us"] for entry in entries))
    names = [escape(entry["name"]) for entry in entries]
    hover = [
        f"{kind} {escape(entry['name'])}{' on ' + escape(entry['host']) if entry.get('host') else ''}<br>"
        f"mean {entry['mean_us'] / per_unit:.4g} {unit} over {entry['calls']} calls<br>"
        f"lost {entry['lost_us'] / per_unit:.4g} {unit} against the median {kind}"
        for entry in entries
    ]
    bars = dict(
        type="bar",
        x=names,
        y=[entry["over_median"] for entry in entries],
        marker={"color": [ALERT_COLOR if entry["name"] == slowest else TYPICAL_COLOR for entry in entries]},
        hovertext=hover,
        hoverinfo="text+y",
        name=f"× the median {kind}",
        showlegend=False,
    )
    ratios = [entry["over_median"] for entry in entries if entry["over_median"] is not None] or [1.0]
    # Bars start just below the smallest ratio (a 2 % straggler is invisible on an axis from 0); both ends are
    # given, so a resize keeps them.
    bottom = min(0.95, min(ratios) - 0.02)
    top = max(1.05, max(ratios))
    return _figure(
        [bars], title, kind, f"time ÷ the median {kind}'s (lower is better)",
        xaxis=_axis(kind, type="category"),
        yaxis=_axis(f"time ÷ the median {kind}'s (lower is better)", range=[bottom, top + 0.08 * (top - bottom)]),
        # The median at 1×, across the whole plot whatever the number of bars.
        shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                 "line": {"color": REFERENCE_COLOR, "width": 1, "dash": "dash"}}],
    )  # fmt: skip


def comparison_sweep_figure(runs: list[tuple[str, dict]], places: list[int] | None = None) -> dict:
    """Size sweeps compared: each run's busbw (as the file printed it, else ours) against size, overlaid,
    in its run's colour (``places``: each run's place among the page's runs, else their order), in-place
    dash-dotted."""
    traces, sizes = [], []
    for index, (name, summary) in zip(places or range(len(runs)), runs, strict=True):
        color = run_style(index)["color"]
        series: dict[tuple[str, str], list[dict]] = {}
        for group in summary["groups"]:
            series.setdefault((group["collective"], group["variant"]), []).append(group)
        for (collective, variant), groups in series.items():
            groups.sort(key=lambda g: g["size_bytes"])
            x = [g["size_bytes"] for g in groups]
            sizes += x
            # The run's name gives way to what tells its curves apart, down to a quarter of the entry.
            what = " ".join(part for part in (collective, variant) if part)
            run_chars = max(LEGEND_NAME_CHARS - 1 - len(what), LEGEND_NAME_CHARS // 4)
            label = " ".join(part for part in (_shortened(name, run_chars), what) if part)
            dash = "dashdot" if variant == "in-place" else "solid"
            traces.append(_scatter(x=x, y=[file_or_ours(g, "busbw_gbps") for g in groups], mode="lines+markers",
                                     name=_legend_name(label), legendgroup=f"run-{index}",
                                     line={"color": color, "dash": dash}))  # fmt: skip
    ticks = _size_ticks(sizes) if sizes else {}
    return _figure(
        traces, "busbw vs data size by run", "data size (bytes, log 2 scale)", "busbw (GB/s, 1 GB = 1e9 B)",
        xaxis=_axis("data size (bytes, log 2 scale)", type="log", **ticks),
    )  # fmt: skip


def bandwidth_figure(summary: dict, *, title: str = "Bandwidth vs data size") -> dict:
    """algbw and busbw (GB/s) per data size, one line per (collective, variant)."""
    series: dict[tuple[str, str], list[dict]] = {}
    for group in summary["groups"]:
        if group.get("size_bytes") is not None and group.get("algbw_gbps") is not None:
            series.setdefault((group["collective"], group["variant"]), []).append(group)
    traces = []
    collectives = list(dict.fromkeys(collective for collective, _ in series))
    for (collective, variant), groups in series.items():
        groups.sort(key=lambda g: g["size_bytes"])
        sizes = [g["size_bytes"] for g in groups]
        name = " ".join(part for part in (collective, variant) if part)
        color = run_style(collectives.index(collective))["color"]  # one run: its collectives take the run colours
        traces.append(_scatter(x=sizes, y=[g["algbw_gbps"] for g in groups], mode="lines+markers",
                                 name=_legend_name(f"{name} algbw"), line={"color": color, "dash": "dot"}))  # fmt: skip
        if any(g.get("busbw_gbps") is not None for g in groups):
            traces.append(_scatter(x=sizes, y=[g.get("busbw_gbps") for g in groups], mode="lines+markers",
                                     name=_legend_name(f"{name} busbw"), line={"color": color}))  # fmt: skip
    return _figure(
        traces, title, "data size (bytes)", "bandwidth (GB/s, 1 GB = 1e9 B)",
        xaxis=_axis("data size (bytes)", type="log", exponentformat="SI"),
    )  # fmt: skip


def comparison_cdf_figure(
    runs: list[tuple[str, dict]], *, log_x: bool = False, places: list[int] | None = None
) -> dict:
    """Overlaid CDFs: each run's completion times (all groups together) as one curve (its body thinned to
    ~``OVERLAY_POINTS``, the tail from p99 on whole) in its run's colour (``places`` as in
    ``comparison_sweep_figure``)."""
    unit, scale = _time_unit([summary for _, summary in runs])
    traces = []
    for index, (name, summary) in zip(places or range(len(runs)), runs, strict=True):
        x, p = _thinned_body(summary["overall_ecdf"], OVERLAY_POINTS)
        style, legendgroup = run_style(index), f"run-{index}"
        traces.append(_curve(x, p, name, x_scale=scale, legendgroup=legendgroup, **style))
        traces.append(_percentile_markers(summary["overall"], name, scale, unit, legendgroup, style["color"]))
    # One legend entry per run: the percentile markers stay out of the legend.
    return _figure(
        traces, "Completion-time CDF by run", f"completion time ({unit})", "fraction ≤ x", log_x=log_x,
        yaxis=_axis("fraction ≤ x", range=[0, 1.02]),
    )  # fmt: skip


# The body of a CDF is drawn from points evenly spaced in rank, so in the fraction ≤ x: 200 steps up a panel
# ~250 px high, 400 up the overlay's ~300 px, are a step every pixel or two; more only cost drawing time.
SMALL_PANEL_POINTS = 200
OVERLAY_POINTS = 400
TAIL_FROM = 0.99


def _thinned_body(grid: dict, points: int = SMALL_PANEL_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """An ECDF grid for a chart narrower than its points: every k-th point of the body, every point from
    p99 on (the exact tail percentiles and the max stay)."""
    x, p = np.asarray(grid["x"]), np.asarray(grid["p"])
    if len(x) <= points:
        return x, p
    keep = np.zeros(len(x), dtype=bool)
    keep[:: -(-len(x) // points)] = True
    keep[p >= TAIL_FROM] = True
    keep[-1] = True
    return x[keep], p[keep]


def comparison_small_multiples(runs: list[tuple[str, dict]], *, log_x: bool = False) -> dict:
    """One panel per run, its CDF curves per data size/collective, on a shared time axis (the body of
    each curve thinned to ~``SMALL_PANEL_POINTS`` for the small panels; the tail from p99 on is kept whole)."""
    unit, scale = _time_unit([summary for _, summary in runs])
    columns = min(3, len(runs))
    x_title = f"completion time ({unit})"
    panels, suffixes = _panels([name for name, _ in runs], columns, x_title, "fraction ≤ x", log_x=log_x, share_y=True)
    styles = group_styles(group for _, summary in runs for group in summary["groups"])
    group_index: dict[str, int] = {}
    traces = []
    for (_, summary), suffix in zip(runs, suffixes, strict=True):
        for group, grid in zip(summary["groups"], summary["ecdf"], strict=True):
            x, p = _thinned_body(grid)
            style, first = _group_style(group_index, styles, group["label"])
            trace = _curve(x, p, group["label"], x_scale=scale, **style)
            # The legend and the hover name the group (the trace's name); the panel's title names the run.
            trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}", showlegend=first)
            traces.append(trace)
    rows = -(-len(runs) // columns)
    return _figure(traces, "CDF per run", x_title, None, log_x=log_x, **panels, height=320 * rows)


def _group_style(group_index: dict[str, int], styles: dict[str, dict], label: str) -> tuple[dict, bool]:
    """A group's line (``styles``: its size's colour, its collective's dash) and legend group, the same in every
    panel of a comparison (numbered in order of first appearance in ``group_index``), and whether this is its
    first trace, the one that carries its legend entry."""
    first = label not in group_index
    index = group_index.setdefault(label, len(group_index))
    return {"legendgroup": f"group-{index}", **styles[label]}, first


# The compare page's delay panels: each run's series thinned to this many points (``delay_series`` again: every
# trial above its group's p99.9 stays, in up to a quarter of the points), a panel this many pixels high, and room
# between panels for the x ticks above and the next panel's title.
COMPARISON_DELAY_POINTS = 250
DELAY_PANEL_PX = 160
DELAY_PANEL_GAP_PX = 64


def comparison_delay_figure(runs: list[tuple[str, dict]]) -> dict:
    """Completion time per iteration, one panel per run stacked in one column (each over its own iterations
    and times), every group of a run overlaid in its panel; a group has one colour and one legend entry
    across the panels. One figure rather than a chart per run: one Plotly draw and one legend where five
    runs took five of each."""
    unit, scale = _time_unit([summary for _, summary in runs])
    rows = len(runs)
    plot_px = rows * DELAY_PANEL_PX + (rows - 1) * DELAY_PANEL_GAP_PX
    panels, suffixes = _panels([name for name, _ in runs], 1, "iteration", f"completion time ({unit})",
                               log_x=False, share_y=False, share_x=False,
                               row_gap=DELAY_PANEL_GAP_PX / plot_px)  # fmt: skip
    styles = group_styles(group for _, summary in runs for group in summary["groups"])
    group_index: dict[str, int] = {}  # label → its legend group, in order of first appearance
    traces = []
    for (_, summary), suffix in zip(runs, suffixes, strict=True):
        for group, series in zip(summary["groups"], summary["delay"], strict=True):
            style, first = _group_style(group_index, styles, group["label"])
            thinned = delay_series(np.asarray(series["x"]), np.asarray(series["y"]), COMPARISON_DELAY_POINTS,
                                   spike_floor=group["p99_9_us"])  # fmt: skip
            trace = _curve(thinned["x"], thinned["y"], group["label"], y_scale=scale, shape="linear", **style)
            # The hover names the group (the trace's name); the panel's title names the run.
            trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}", showlegend=first,
                         hovertemplate=f"iteration %{{x}}: %{{y:.4g}} {unit}")  # fmt: skip
            traces.append(trace)
    title = "Time per iteration, by run"
    # The plot, the title above it and the x axis title's 60 px below; _figure adds the legend's band.
    height = _top_margin(_title_lines(title)) + plot_px + 60
    return _figure(traces, title, "iteration", None, **panels, height=height)


def step_cost_figure(runs: list[tuple[str, dict]]) -> dict:
    """Each run's communication time per training step at p50 (``results.analysis.step_cost``), stacked by
    collective kind: one bar per run that has a step cost, one grey and pattern per kind across the bars (the
    runs' colours mean runs on the same page)."""
    typical = max((cost["step"]["p50_us"] or 0.0 for _, cost in runs), default=0.0)
    unit, us_per_unit = time_unit(typical)
    kinds = list(dict.fromkeys(op for _, cost in runs for op in cost["by_op"]))
    labels = [escape(name) for name, _ in runs]
    traces = []
    for index, op in enumerate(kinds):
        values = [
            (cost["by_op"][op]["p50_us"] or 0.0) / us_per_unit if op in cost["by_op"] else None for _, cost in runs
        ]
        hover = f"%{{x}}<br>{escape(op)}: %{{y:.4g}} {unit} per step<extra></extra>"
        traces.append({"type": "bar", "x": labels, "y": values, "name": escape(op),
                       "marker": kind_marker(index), "hovertemplate": hover})  # fmt: skip
    figure = _figure(
        traces, "Comm time per training step, p50", "run", f"time per step ({unit}, lower is better)",
        xaxis=_axis("run", type="category"), barmode="stack", showlegend=True,
    )  # fmt: skip
    if len(traces) == 1:
        _legend_below(figure, 1)
    return figure
