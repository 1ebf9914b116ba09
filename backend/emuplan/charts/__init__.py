"""Plotly figures (JSON-able dicts) built from cached run summaries: CDF, delay, bandwidth, size sweep,
comparisons."""

from emuplan.charts.figures import (
    bandwidth_figure,
    cdf_figure,
    comparison_cdf_figure,
    comparison_small_multiples,
    comparison_sweep_figure,
    delay_figure,
    sweep_figure,
)

__all__ = [
    "bandwidth_figure",
    "cdf_figure",
    "comparison_cdf_figure",
    "comparison_small_multiples",
    "comparison_sweep_figure",
    "delay_figure",
    "sweep_figure",
]
