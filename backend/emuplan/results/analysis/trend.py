"""A series of runs over time ("the nightly all-reduce on this platform"): each run's figures against the
noise of the runs before it, and what changed since the previous run, regressions first.

The noise band of a run is robust: the median of the previous ``window`` runs' values and their median
absolute deviation, scaled to a normal standard deviation (1.4826 × MAD, as ``scipy.stats.median_abs_deviation``
with ``scale="normal"``), ± ``mad_k`` of it — one slow night among seven moves neither the
median nor the MAD, where a mean and standard deviation would widen the band around it. The band is never
narrower than ± ``min_change`` of the median: a fabric whose runs agree to 0.1 % would otherwise flag a
1 % wobble no one acts on. A run outside the band is a ``regression`` when its figure got worse (every
figure here is a bandwidth: lower is worse) and an ``improvement`` when it got better. A regression needs no
history to be seen: from the second run on the band is the earlier runs' median ± ``min_change`` (the MAD of
one or two runs says nothing of the noise), so a run that halves its peak busbw is a regression with one run
before it; only a series' first run has no band.

Why not a change-point method (E-Divisive, as MongoDB's and Apache Otava's performance CI run it): those find
where a finished series changed level, with a stated significance, and need several points after the change; a
nightly check asks an online question (is tonight's run outside the noise of the runs before it), which a
trailing robust band answers from the second run on, the same way on every page. Their packages do not install
beside this one either (measured 2026-12-07): signal-processing-algorithms 2.1.6 pins numpy < 2, gevent and
Python < 3.12; apache-otava 0.8.0 pins numpy 2.2.0 and brings google-cloud-bigquery, slack-sdk and pg8000.
"""

from dataclasses import dataclass
from datetime import datetime
from statistics import median

from emuplan.wording import size_label

WINDOW = 7
MIN_HISTORY = 1
# Below this many earlier values their MAD says nothing of the noise: the band is ± ``min_change`` alone.
MIN_HISTORY_FOR_NOISE = 3
MAD_K = 3.0
MIN_CHANGE = 0.05
STATUSES = ("regression", "improvement", "within", "no band")
# The figures a series of size sweeps judges (busbw in GB/s, 1 GB = 1e9 B).
PEAK_BUSBW = "peak_busbw_gbps"
AVERAGE_BUSBW = "average_busbw_gbps"
BUSBW_AT = "busbw_gbps@"


def busbw_at(size_bytes: int) -> str:
    """The name of the figure "busbw at this size" (``busbw_gbps@1073741824``)."""
    return f"{BUSBW_AT}{size_bytes}"


def figure_label(name: str) -> str:
    """What pages, charts and the CLI call a figure: "peak busbw", "busbw at 1 GiB"."""
    if name.startswith(BUSBW_AT):
        return f"busbw at {size_label(int(name.removeprefix(BUSBW_AT)))}"
    return {PEAK_BUSBW: "peak busbw", AVERAGE_BUSBW: "average busbw"}.get(name, name)


@dataclass(frozen=True)
class SeriesPoint:
    """One run of a series: when it was measured and its figures (None where the run lacks one)."""

    run_id: int
    name: str
    measured_at: datetime
    figures: dict[str, float | None]


# 1 / Φ⁻¹(3/4): a MAD times this estimates the standard deviation of normal noise (SciPy's
# ``median_abs_deviation(..., scale="normal")``, computed here in plain Python: SciPy's call cost 0.5 ms, a series
# page makes one per run and figure).
MAD_TO_SIGMA = 1.482602218505602


def _band(history: list[float], mad_k: float, min_change: float) -> tuple[float, float, float]:
    centre = median(history)
    spread = min_change * abs(centre)
    if len(history) >= MIN_HISTORY_FOR_NOISE:
        robust_sigma = MAD_TO_SIGMA * median([abs(value - centre) for value in history])
        spread = max(mad_k * robust_sigma, spread)
    return centre, centre - spread, centre + spread


def judge_series(
    points: list[SeriesPoint],
    *,
    window: int = WINDOW,
    min_history: int = MIN_HISTORY,
    mad_k: float = MAD_K,
    min_change: float = MIN_CHANGE,
) -> dict[str, list[dict]]:
    """Per figure, each run in time order with its band (from the up to ``window`` runs before it that have
    the figure) and its status: ``regression``, ``improvement``, ``within`` or ``no band``."""
    ordered = sorted(points, key=lambda point: (point.measured_at, point.run_id))
    names = list(dict.fromkeys(name for point in ordered for name in point.figures))
    judged: dict[str, list[dict]] = {}
    for name in names:
        earlier: list[float] = []
        entries = []
        for point in ordered:
            value = point.figures.get(name)
            if value is None:
                continue
            history = earlier[-window:]
            entry = {"run_id": point.run_id, "name": point.name, "measured_at": point.measured_at, "value": value,
                     "median": None, "low": None, "high": None, "change_pct": None, "status": "no band"}  # fmt: skip
            if len(history) >= min_history:
                centre, low, high = _band(history, mad_k, min_change)
                status = "regression" if value < low else "improvement" if value > high else "within"
                change = (value - centre) / centre * 100.0 if centre else None
                entry.update(median=centre, low=low, high=high, change_pct=change, status=status)
            entries.append(entry)
            earlier.append(value)
        judged[name] = entries
    return judged


def what_changed(judged: dict[str, list[dict]]) -> dict:
    """The latest run against the one before it, figure by figure: regressions first, then improvements,
    then the rest, each group biggest move first; ``quiet`` when no figure of the latest run left its band (its
    summary says so only when there was a run before it to have a band from)."""
    latest_id = max(
        ((entry["measured_at"], entry["run_id"]) for entries in judged.values() for entry in entries), default=None
    )
    if latest_id is None:
        return {"run_id": None, "previous_run_id": None, "changes": [], "quiet": True, "summary": "no runs yet"}
    run_id = latest_id[1]
    changes = []
    for name, entries in judged.items():
        if len(entries) < 2 or entries[-1]["run_id"] != run_id:
            continue
        latest, previous = entries[-1], entries[-2]
        since_previous = (
            (latest["value"] - previous["value"]) / previous["value"] * 100.0 if previous["value"] else None
        )
        changes.append({"figure": name, "label": figure_label(name), "value": latest["value"],
                        "previous_value": previous["value"],
                        "previous_run_id": previous["run_id"], "change_since_previous_pct": since_previous,
                        "median": latest["median"], "change_from_median_pct": latest["change_pct"],
                        "status": latest["status"]})  # fmt: skip
    order = {"regression": 0, "improvement": 1, "within": 2, "no band": 3}
    changes.sort(key=lambda c: (order[c["status"]], -abs(c["change_since_previous_pct"] or 0.0)))
    flagged = [c for c in changes if c["status"] in ("regression", "improvement")]
    previous_ids = {c["previous_run_id"] for c in changes}
    if flagged:
        summary = "; ".join(
            f"{c['label']} {c['status']}: {c['change_from_median_pct']:+.1f} % from the median" for c in flagged
        )
    elif not changes:
        summary = f"run #{run_id} is the series' first: nothing before it to compare it with yet"
    else:
        summary = f"quiet: run #{run_id} stays within the noise band of the runs before it on every figure"
    return {
        "run_id": run_id,
        "previous_run_id": min(previous_ids) if len(previous_ids) == 1 else None,
        "changes": changes,
        "quiet": not flagged,
        "summary": summary,
    }
