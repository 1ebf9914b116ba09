"""The trend page's charts: one figure of a series over time with its noise band shaded and the runs that left
it marked (``results.analysis.trend`` judged them; nothing is computed here)."""

from emuplan.charts.figures import _axis, _figure, _scatter
from emuplan.charts.palette import ALERT_COLOR, RUN_COLORS
from emuplan.results.analysis.trend import figure_label

# The series is one run's figure after another: the first run colour, its noise band a shade of it.
VALUE_COLOR = RUN_COLORS[0]
BAND_COLOR = "rgba(46, 145, 229, 0.18)"
MARKS = {"regression": (ALERT_COLOR, "x", "regression"), "improvement": ("#2ca02c", "triangle-up", "improvement")}


def trend_figure(name: str, entries: list[dict], *, title: str) -> dict:
    """``entries``: one judged figure of a series in time order (``judge_series``)."""
    x = [entry["measured_at"].isoformat() for entry in entries]
    banded = [(time, entry) for time, entry in zip(x, entries, strict=True) if entry["low"] is not None]
    traces = []
    if banded:
        band_x = [time for time, _ in banded]
        # The band's lower edge (invisible), then its upper edge filled down to it.
        traces.append(_scatter(x=band_x, y=[entry["low"] for _, entry in banded], mode="lines",
                               line={"width": 0}, hoverinfo="skip", showlegend=False))  # fmt: skip
        traces.append(_scatter(x=band_x, y=[entry["high"] for _, entry in banded], mode="lines",
                               line={"width": 0}, fill="tonexty", fillcolor=BAND_COLOR,
                               name="noise band (median ± 3 robust σ, ≥ ±5 %)"))  # fmt: skip
        traces.append(_scatter(x=band_x, y=[entry["median"] for _, entry in banded], mode="lines",
                               line={"color": VALUE_COLOR, "dash": "dot", "width": 1},
                               name="median of the runs before"))  # fmt: skip
    traces.append(_scatter(x=x, y=[entry["value"] for entry in entries], mode="lines+markers",
                           line={"color": VALUE_COLOR}, name=figure_label(name),
                           text=[f"#{entry['run_id']} {entry['name']}" for entry in entries]))  # fmt: skip
    for status, (color, symbol, label) in MARKS.items():
        marked = [(time, entry) for time, entry in zip(x, entries, strict=True) if entry["status"] == status]
        if marked:
            traces.append(_scatter(x=[time for time, _ in marked], y=[entry["value"] for _, entry in marked],
                                   mode="markers", marker={"color": color, "symbol": symbol, "size": 12}, name=label,
                                   text=[f"#{entry['run_id']} {entry['name']}" for _, entry in marked]))  # fmt: skip
    return _figure(traces, title, "measured", "busbw (GB/s, 1 GB = 1e9 B)", xaxis=_axis("measured", type="date"))
