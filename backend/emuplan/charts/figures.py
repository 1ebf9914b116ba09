"""Plotly figures from cached run summaries (``results.stats.summarise``), as JSON-able dicts.

Every figure is built with ``plotly.graph_objects`` from the ECDF grids and delay series cached at
import, so no figure reads a run's samples. Traces are SVG ``scatter`` (pages show many charts; WebGL
contexts are limited), arrays are float32 numpy arrays (plotly encodes them as compact typed arrays),
and every string that came from a user or a file is HTML-escaped, because Plotly renders a subset of
HTML in names, titles and hover text.
"""

import html
import json

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from emuplan.results.stats import PERCENTILES

MARKED_PERCENTILES = ("p50", "p90", "p99", "p99_9")
PERCENTILE_LABELS = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p99_9": "p99.9"}


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def to_dict(figure: go.Figure) -> dict:
    """The figure as plain JSON types (typed arrays as ``{"dtype", "bdata"}``), what the API returns."""
    return json.loads(figure.to_json(validate=False))


def _time_unit(summaries: list[dict]) -> tuple[str, float]:
    """Show milliseconds when the typical completion is a millisecond or more (the seeds' scale)."""
    typical = max((s["overall"]["p50_us"] for s in summaries), default=0.0)
    return ("ms", 1e-3) if typical >= 1000.0 else ("µs", 1.0)


def _layout(figure: go.Figure, title: str, x_title: str, y_title: str | None, *, log_x: bool = False) -> go.Figure:
    figure.update_layout(
        title={"text": escape(title)},
        xaxis={"title": {"text": x_title}, "type": "log" if log_x else "linear"},
        yaxis={"title": {"text": y_title}} if y_title else {},
        legend={"orientation": "h", "y": -0.2},
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
        template="plotly_white",
    )
    return figure


# Below this many points a curve also gets markers: a one-sample group would otherwise draw nothing.
SPARSE_POINTS = 50


def _curve(
    x: list, y: list, name: str, *, x_scale: float = 1.0, y_scale: float = 1.0, shape: str = "hv",
    legendgroup: str | None = None,
) -> go.Scatter:  # fmt: skip
    return go.Scatter(
        x=np.asarray(x, dtype=np.float32) * np.float32(x_scale),
        y=np.asarray(y, dtype=np.float32) * np.float32(y_scale),
        mode="lines" if len(x) > SPARSE_POINTS else "lines+markers",
        line={"shape": shape},
        name=escape(name),
        legendgroup=legendgroup,
    )


def _percentile_markers(stats: dict, name: str, scale: float, unit: str, legendgroup: str | None = None):
    marks = [m for m in MARKED_PERCENTILES if stats.get(f"{m}_us") is not None]
    x = [stats[f"{m}_us"] * scale for m in marks] + [stats["max_us"] * scale]
    y = [PERCENTILES[m] / 100.0 for m in marks] + [1.0]
    labels = [PERCENTILE_LABELS[m] for m in marks] + ["max"]
    return go.Scatter(
        x=x,
        y=y,
        mode="markers",
        text=labels,
        marker={"size": 7, "symbol": "diamond"},
        name=escape(f"{name} percentiles"),
        legendgroup=legendgroup,
        showlegend=False,
        hovertemplate=f"%{{text}}: %{{x:.4g}} {unit}<extra>{escape(name)}</extra>",
    )


def cdf_figure(summary: dict, *, title: str = "Completion-time CDF", log_x: bool = False) -> dict:
    """One ECDF curve per (collective, size, variant) with p50/p90/p99/p99.9 and max marked."""
    unit, scale = _time_unit([summary])
    figure = go.Figure()
    for index, (group, grid) in enumerate(zip(summary["groups"], summary["ecdf"], strict=True)):
        figure.add_trace(_curve(grid["x"], grid["p"], group["label"], x_scale=scale, legendgroup=f"group-{index}"))
        figure.add_trace(_percentile_markers(group, group["label"], scale, unit, legendgroup=f"group-{index}"))
    if "flows" in summary:
        flows = summary["flows"]
        figure.add_trace(_curve(flows["ecdf"]["x"], flows["ecdf"]["p"], "flow completion (per flow)", x_scale=scale))
    _layout(figure, title, f"completion time ({unit})", "fraction of completions ≤ x", log_x=log_x)
    figure.update_yaxes(range=[0, 1.02])
    return to_dict(figure)


def delay_figure(summary: dict, *, title: str = "Completion time per iteration", per_size: bool = False) -> dict:
    """Completion time per iteration (min/max-preserving downsampled); one panel per data size when
    ``per_size`` (pipeline runs: one all-reduce per layer) and there is more than one size."""
    unit, scale = _time_unit([summary])
    groups = list(zip(summary["groups"], summary["delay"], strict=True))
    if per_size and len(groups) > 1:
        return to_dict(_stacked_delay_panels(groups, title, unit, scale))
    figure = go.Figure()
    for group, series in groups:
        figure.add_trace(_curve(series["x"], series["y"], group["label"], y_scale=scale, shape="linear"))
    return to_dict(_layout(figure, title, "iteration", f"completion time ({unit})"))


PANEL_GAP = 0.05


def _stacked_delay_panels(groups: list[tuple[dict, dict]], title: str, unit: str, scale: float) -> go.Figure:
    """One panel per data size sharing the iteration axis. The axes are laid out directly: plotly's
    make_subplots costs more than the whole figure otherwise."""
    count = len(groups)
    height = (1 - PANEL_GAP * (count - 1)) / count
    traces, axes, titles = [], {}, []
    for index, (group, series) in enumerate(groups):
        suffix = "" if index == 0 else str(index + 1)
        trace = _curve(series["x"], series["y"], group["label"], y_scale=scale, shape="linear")
        trace.yaxis = f"y{suffix}"
        traces.append(trace)
        top = 1 - index * (height + PANEL_GAP)
        axes[f"yaxis{suffix}"] = {"domain": [max(0.0, top - height), top], "anchor": "x", "title": {"text": unit}}
        titles.append({"text": escape(group["label"]), "x": 0.5, "xref": "paper", "y": top, "yref": "paper",
                       "xanchor": "center", "yanchor": "bottom", "showarrow": False})  # fmt: skip
    figure = go.Figure(data=traces, layout={**axes, "annotations": titles, "height": max(400, 180 * count)})
    _layout(figure, title, "iteration", None)
    figure.update_xaxes(anchor=f"y{count}")
    return figure


def bandwidth_figure(summary: dict, *, title: str = "Bandwidth vs data size") -> dict:
    """algbw and busbw (GB/s) per data size, one line per (collective, variant)."""
    series: dict[tuple[str, str], list[dict]] = {}
    for group in summary["groups"]:
        if group.get("size_bytes") is not None and group.get("algbw_gbps") is not None:
            series.setdefault((group["collective"], group["variant"]), []).append(group)
    figure = go.Figure()
    for (collective, variant), groups in series.items():
        groups.sort(key=lambda g: g["size_bytes"])
        sizes = [g["size_bytes"] for g in groups]
        name = " ".join(part for part in (collective, variant) if part)
        figure.add_trace(go.Scatter(x=sizes, y=[g["algbw_gbps"] for g in groups], mode="lines+markers",
                                    name=escape(f"{name} algbw"), line={"dash": "dot"}))  # fmt: skip
        if any(g.get("busbw_gbps") is not None for g in groups):
            figure.add_trace(go.Scatter(x=sizes, y=[g.get("busbw_gbps") for g in groups], mode="lines+markers",
                                        name=escape(f"{name} busbw")))  # fmt: skip
    _layout(figure, title, "data size (bytes)", "bandwidth (GB/s, 1 GB = 1e9 B)", log_x=True)
    figure.update_xaxes(exponentformat="SI")
    return to_dict(figure)


def comparison_cdf_figure(runs: list[tuple[str, dict]], *, log_x: bool = False) -> dict:
    """Overlaid CDFs: each run's completion times (all groups together) as one curve."""
    unit, scale = _time_unit([summary for _, summary in runs])
    figure = go.Figure()
    for index, (name, summary) in enumerate(runs):
        grid = summary["overall_ecdf"]
        figure.add_trace(_curve(grid["x"], grid["p"], name, x_scale=scale, legendgroup=f"run-{index}"))
        figure.add_trace(_percentile_markers(summary["overall"], name, scale, unit, legendgroup=f"run-{index}"))
    _layout(figure, "Completion-time CDF by run", f"completion time ({unit})", "fraction ≤ x", log_x=log_x)
    figure.update_yaxes(range=[0, 1.02])
    return to_dict(figure)


def comparison_small_multiples(runs: list[tuple[str, dict]], *, log_x: bool = False) -> dict:
    """One panel per run, its CDF curves per data size/collective, on a shared time axis."""
    unit, scale = _time_unit([summary for _, summary in runs])
    columns = min(3, len(runs))
    rows = -(-len(runs) // columns)
    figure = make_subplots(
        rows=rows, cols=columns, shared_xaxes="all", shared_yaxes="all",
        subplot_titles=[escape(name) for name, _ in runs], horizontal_spacing=0.05, vertical_spacing=0.12,
    )  # fmt: skip
    for index, (name, summary) in enumerate(runs):
        row, column = divmod(index, columns)
        for group, grid in zip(summary["groups"], summary["ecdf"], strict=True):
            trace = _curve(grid["x"], grid["p"], f"{name}: {group['label']}", x_scale=scale)
            figure.add_trace(trace, row=row + 1, col=column + 1)
    figure.update_xaxes(type="log" if log_x else "linear")
    figure.update_layout(height=320 * rows, showlegend=False)
    return to_dict(_layout(figure, "CDF per run", f"completion time ({unit})", "fraction ≤ x", log_x=log_x))
