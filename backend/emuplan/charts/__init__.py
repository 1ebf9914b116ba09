"""Plotly figures (plain JSON-able dicts) built from cached run summaries: CDF, delay, bandwidth, size sweep,
stragglers, comparisons.

Owns the figure kinds (``FigureKind``). May import ``emuplan.results``; never FastAPI or the database.
"""

from emuplan.charts.figures import (
    FigureKind,
    bandwidth_figure,
    cdf_figure,
    comparison_cdf_figure,
    comparison_delay_figure,
    comparison_small_multiples,
    comparison_sweep_figure,
    delay_figure,
    step_cost_figure,
    straggler_figure,
    sweep_figure,
)

__all__ = [
    "FigureKind",
    "bandwidth_figure",
    "cdf_figure",
    "comparison_cdf_figure",
    "comparison_delay_figure",
    "comparison_small_multiples",
    "comparison_sweep_figure",
    "delay_figure",
    "step_cost_figure",
    "straggler_figure",
    "sweep_figure",
]
