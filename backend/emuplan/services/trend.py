"""Series of runs over time: ``GET /api/trend``, the ``/trend`` page, ``emuplan trend`` and ``GET /metrics``.

A series is the runs of one platform (``run.platform``), optionally of one tag and one rank count, read per
collective. Its figures per run are those of the run page's size sweep (``results.analysis.run_analysis.size_sweep``):
the peak and the average busbw (nccl-tests' convention) and the busbw at chosen sizes; ``results.analysis.trend`` judges
them against the noise of the runs before.

Only the last ``limit`` runs of a series are read, newest first (by id: the order they were stored), through
``ix_run_platform_id`` or ``ix_run_platform_ranks_id`` (migration 0013), with each run's figures from
``run_trend_figures`` (written with its summary: ``services.series_figures``) rather than its 56 KB summary: the
same few rows whether the series holds 10 runs or 10,000.
"""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import exists
from sqlalchemy.orm import lazyload
from sqlmodel import Session, col, select

from emuplan.results.analysis.trend import AVERAGE_BUSBW, PEAK_BUSBW, SeriesPoint, busbw_at, judge_series, what_changed
from emuplan.services.runs import run_judgement
from emuplan.services.series_figures import figures_of
from emuplan.settings import Settings
from emuplan.store.platforms import PlatformNotFound
from emuplan.store.tables import Run, RunTag, RunTrendFigures, StoredPlatform
from emuplan.workload.platforms import BUILTIN_PLATFORMS

SERIES_RUNS = 30
MAX_SERIES_RUNS = 200
# Sizes judged when the reader names none: the largest the series' runs all measured, at most this many.
DEFAULT_SIZES = 3
# /metrics reads this many of each platform's newest runs: a series none of them belongs to has gone stale
# and is left out, so a scrape costs the same however long the platforms' histories grow.
METRICS_RECENT_RUNS = 50


class SeriesError(ValueError):
    """A series asked for in a way no run can answer (a limit out of range, a collective it never ran)."""


def run_time(run: Run) -> datetime:
    """When a run was measured (where given: upload, --measured-at, PATCH), else when it was imported: the one
    place a series reads its time axis from."""
    return run.measured_at or run.created_at


@dataclass(frozen=True)
class SweepFigures:
    """What a series reads of one run for one collective (busbw in GB/s, 1 GB = 1e9 B)."""

    peak_busbw_gbps: float | None
    average_busbw_gbps: float | None
    # busbw per size, of the variant the file prints first (nccl-tests: out-of-place).
    busbw_by_size: dict[int, float | None]


def _sweeps(figures: dict) -> dict[str, SweepFigures]:
    return {
        collective: SweepFigures(
            peak_busbw_gbps=entry["peak_busbw_gbps"],
            average_busbw_gbps=entry["average_busbw_gbps"],
            busbw_by_size={int(size): busbw for size, busbw in entry["busbw_by_size"].items()},
        )
        for collective, entry in figures.items()
    }


@dataclass(frozen=True)
class SeriesRun:
    """A run of a series: its row (without its summary) and its figures per collective."""

    run: Run
    sweeps: dict[str, SweepFigures]


def platform_names(session: Session) -> list[str]:
    """The built-in platforms' names, then the stored profiles' (what a series can be of)."""
    return [*BUILTIN_PLATFORMS, *session.exec(select(StoredPlatform.name).order_by(col(StoredPlatform.name))).all()]


def newest_platform(session: Session) -> str | None:
    """The platform of the newest run that names one: the series a trend page opens on."""
    query = select(Run.platform).where(col(Run.platform).is_not(None)).order_by(col(Run.id).desc()).limit(1)
    return session.exec(query).first()


def known_platform(session: Session, name: str) -> None:
    """Raises PlatformNotFound unless ``name`` is a built-in or a stored profile."""
    stored = select(StoredPlatform.id).where(StoredPlatform.name == name)
    if name not in BUILTIN_PLATFORMS and session.exec(stored).first() is None:
        raise PlatformNotFound(f"no platform named {name!r}: `emuplan platforms list` shows them")


def series_runs(
    session: Session, platform: str, *, tag: str | None = None, ranks: int | None = None, limit: int = SERIES_RUNS
) -> list[SeriesRun]:
    """The newest ``limit`` runs of the series, newest first, with their figures (``run_trend_figures``; from
    the summary for a run stored before it existed)."""
    query = (
        select(Run, RunTrendFigures.figures)
        .outerjoin(RunTrendFigures, col(RunTrendFigures.run_id) == Run.id)
        .where(Run.platform == platform)
        .options(lazyload(Run.cached_summary))
    )
    if ranks is not None:
        query = query.where(Run.ranks == ranks)
    if tag:
        # Checked per run through run_tag's primary key while the platform's index is walked newest first.
        query = query.where(exists().where(col(RunTag.run_id) == Run.id, col(RunTag.folded_tag) == tag.casefold()))
    rows = session.exec(query.order_by(col(Run.id).desc()).limit(limit)).all()
    return [
        SeriesRun(run, _sweeps(figures if figures is not None else figures_of(run.summary, run.ranks)))
        for run, figures in rows
    ]


def _default_sizes(per_run: list[SweepFigures]) -> list[int]:
    shared = set.intersection(*(set(figures.busbw_by_size) for figures in per_run)) if per_run else set()
    return sorted(shared)[-DEFAULT_SIZES:]


def sizes_from_text(text: str | None) -> list[int] | None:
    """``sizes=1073741824,2147483648`` (the API's and the CLI's option) as sizes; None when empty."""
    if not text or not text.strip():
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(part.isdigit() and 0 < int(part) < 2**63 for part in parts):
        raise SeriesError(f"sizes: comma-separated sizes in bytes (e.g. 1073741824,2147483648), got {text!r}")
    return sorted({int(part) for part in parts})


def trend(
    session: Session,
    platform: str,
    *,
    collective: str | None = None,
    tag: str | None = None,
    ranks: int | None = None,
    sizes: list[int] | None = None,
    limit: int = SERIES_RUNS,
) -> dict:
    """The series' newest ``limit`` runs with their figures for one collective (the newest run's first when
    none is named), each figure judged against the runs before it, and what changed since the previous run."""
    if not 1 <= limit <= MAX_SERIES_RUNS:
        raise SeriesError(f"limit: between 1 and {MAX_SERIES_RUNS} runs, got {limit}")
    known_platform(session, platform)
    swept = [
        (member.run, member.sweeps) for member in series_runs(session, platform, tag=tag, ranks=ranks, limit=limit)
    ]
    collectives = list(dict.fromkeys(name for _, figures in swept for name in figures))
    if collective is None and collectives:
        collective = collectives[0]
    if collective is not None and collectives and collective not in collectives:
        raise SeriesError(
            f"collective: no run of this series has {collective!r}; its runs have {', '.join(collectives)}"
        )
    members = [(run, figures[collective]) for run, figures in swept if collective in figures]
    chosen_sizes = sizes or _default_sizes([figures for _, figures in members])
    points = [
        SeriesPoint(
            run_id=run.id,
            name=run.name,
            measured_at=run_time(run),
            figures={
                PEAK_BUSBW: figures.peak_busbw_gbps,
                AVERAGE_BUSBW: figures.average_busbw_gbps,
                **{busbw_at(size): figures.busbw_by_size.get(size) for size in chosen_sizes},
            },
        )
        for run, figures in members
    ]
    judged = judge_series(points)
    return {
        "platform": platform,
        "collective": collective,
        "tag": tag,
        "ranks": ranks,
        "limit": limit,
        "sizes": chosen_sizes,
        "collectives": collectives,
        "what_changed": what_changed(judged),
        "runs": [
            {"run_id": point.run_id, "name": point.name, "measured_at": point.measured_at, "figures": point.figures}
            for point in points
        ],
        "figures": judged,
    }


@dataclass(frozen=True)
class LatestInSeries:
    """A series' newest run, as /metrics exposes it."""

    platform: str
    collective: str
    tag: str  # "" : the series of every tag
    ranks: int | None
    run_id: int
    peak_busbw_gbps: float | None
    average_busbw_gbps: float | None
    # The run's verdict and its % of expected at the large sizes (results.analysis.verdict), exposed once a run carries
    # them; None leaves their gauges out rather than report a made-up figure.
    verdict: str | None = None
    pct_of_expected: float | None = None
    # Whether its peak or average busbw regressed against the runs before it (results.analysis.trend); None for a
    # series' first run, which has nothing to regress from.
    regression: bool | None = None


def latest_per_series(session: Session, settings: Settings) -> list[LatestInSeries]:
    """Each series' newest run (by when it was measured) among its platform's ``METRICS_RECENT_RUNS`` newest: per
    platform, rank count, collective and tag (each tag of the run, and "" for the series of every tag), with the
    run's verdict and % of expected as its page shows them (``services.runs.run_judgement``, once per run) and whether
    its peak or average busbw regressed against the runs before it in the series."""
    judgements: dict[int, tuple[str, dict[str, float]]] = {}
    latest: list[LatestInSeries] = []
    for platform in platform_names(session):
        series: dict[tuple, list[tuple[Run, SweepFigures]]] = {}
        for member in series_runs(session, platform, limit=METRICS_RECENT_RUNS):
            run = member.run
            for tag in ["", *dict.fromkeys(tag.casefold() for tag in run.tags)]:
                for collective, figures in member.sweeps.items():
                    series.setdefault((run.ranks, tag, collective), []).append((run, figures))
        for (ranks, tag, collective), members in series.items():
            run, figures = max(members, key=lambda item: (run_time(item[0]), item[0].id))
            if run.id not in judgements:
                judgements[run.id] = run_judgement(session, run, settings)
            status, expected = judgements[run.id]
            latest.append(
                LatestInSeries(platform, collective, tag, ranks, run.id, figures.peak_busbw_gbps,
                               figures.average_busbw_gbps, status, expected.get(collective), _regressed(members))
            )  # fmt: skip
    return latest


def _regressed(members: list[tuple[Run, "SweepFigures"]]) -> bool | None:
    """Whether the newest of a series' runs regressed on its peak or average busbw (``results.analysis.trend``)."""
    if len(members) < 2:
        return None
    points = [
        SeriesPoint(run.id, run.name, run_time(run), {PEAK_BUSBW: figures.peak_busbw_gbps,
                                                      AVERAGE_BUSBW: figures.average_busbw_gbps})
        for run, figures in members
    ]  # fmt: skip
    changed = what_changed(judge_series(points))
    return any(change["status"] == "regression" for change in changed["changes"])
