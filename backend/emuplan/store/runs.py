"""Runs: store a parsed result, list, read, delete, and load its samples back.

Storing (``save_run``) writes the ``run`` row (with the overall median and p99 the lists show), its
``run_table`` Parquet blobs (``samples``; ``flows`` for per-flow uploads; ``rank_times`` when the file
times every rank), its ``run_summary`` row (``run.summary``: statistics from ``results.stats.summarise``;
of the per-rank figures only the slowest rank and host), its ``run_curves`` row (the whole summary: ECDF
grids and delay series too) and its case-folded tags in ``run_tag`` in the caller's session — one
transaction: the caller commits once.

Entry points for other code:

- ``import_result_file(session, data, file_name, *, name, ...)`` — parse + duplicate check + save, what the
  API's ``POST /api/runs`` and ``emuplan import`` do.
- ``save_run(session, parsed, *, name, plan_id=None, strategy=None, tags=(), origin="imported",
  origin_detail="", file_name=None, content_sha256=None) -> Run`` — store results that did not come as
  an upload (e.g. local measurements: build a ``ParsedResult`` with ``parse_result_file`` on the CSV the
  measurement wrote, then call ``save_run(..., origin="measured")``).

Duplicates: an upload whose bytes have the SHA-256 of a stored run's upload raises ``DuplicateRun`` with
the existing run's id (the API answers 409 with ``existing_run_id``; the CLI prints it).
"""

import hashlib
import io
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Literal, get_args

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import delete, func
from sqlmodel import Session, col, select

from emuplan import charts
from emuplan.charts import FigureKind
from emuplan.results.analysis import (
    SWEEP_MAX_SAMPLES,
    Assumptions,
    RunKind,
    analyse,
    page_time_unit,
    peak_busbw,
    resolve_assumptions,
    run_kind,
)
from emuplan.results.canonical import ParsedResult, ResultFileError
from emuplan.results.compare import RunSummary, compare_runs
from emuplan.results.parse import parse_result_file
from emuplan.results.stats import NetworkModel, non_finite_figure, strip_curves, summarise
from emuplan.settings import Settings
from emuplan.store.models import CachedSummary, Plan, Run, RunCurves, RunTable, RunTag
from emuplan.store.plans import plan_document
from emuplan.store.rows import NotFound
from emuplan.workload.document import PlanDocument
from emuplan.workload.plan_options import Strategy

Origin = Literal["imported", "measured", "generated"]
ORIGINS = get_args(Origin)
# Lists show one page of runs at a time, so they cost the same at 10 runs and at 10,000.
RUNS_PER_PAGE = 50
MAX_RUNS_PER_PAGE = 1000


class RunNotFound(NotFound):
    def __init__(self, run_id: int):
        super().__init__(f"run {run_id} does not exist")
        self.run_id = run_id


class DuplicateRun(ValueError):
    def __init__(self, existing: Run, file_name: str | None):
        super().__init__(
            f"{file_name or 'this file'}: identical content was already imported "
            f"as run {existing.id} ({existing.name!r})"
        )
        self.existing_run_id = existing.id


class RunInputError(ValueError):
    """A bad field of the import request (strategy, plan, origin) rather than of the file."""


def sha256_hex(source: bytes | Path) -> str:
    if isinstance(source, Path):
        with source.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    return hashlib.sha256(source).hexdigest()


def _parquet_bytes(table: pa.Table) -> bytes:
    """The table as Parquet, LZ4 without column statistics, each column in the encoding made for its type:
    dictionary pages only for the text columns (which already are dictionaries: trying one on millions of
    distinct durations is what made writing slow), the bytes of floats split into streams (LZ4 then finds the
    repeated exponents) and integers as deltas. 2M samples: 17.5 MB in 0.11 s CPU against 26.2 MB in 0.16 s
    with PLAIN floats and integers, and read back 2-3x faster."""
    encodings = {}
    for column in table.schema:
        if pa.types.is_floating(column.type):
            encodings[column.name] = "BYTE_STREAM_SPLIT"
        elif pa.types.is_integer(column.type):
            encodings[column.name] = "DELTA_BINARY_PACKED"
    text_columns = [column.name for column in table.schema if pa.types.is_dictionary(column.type)]
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        compression="lz4",
        write_statistics=False,
        use_dictionary=text_columns,
        column_encoding=encodings,
    )
    return sink.getvalue()


def _network_of(session: Session, plan_id: int | None) -> NetworkModel | None:
    if plan_id is None:
        return None
    plan = session.get(Plan, plan_id)
    if plan is None:
        raise RunInputError(f"plan_id: no plan with id {plan_id}")
    return NetworkModel.from_plan(plan_document(plan))


def save_run(
    session: Session,
    parsed: ParsedResult,
    *,
    name: str,
    plan_id: int | None = None,
    strategy: str | None = None,
    tags: Iterable[str] = (),
    origin: str = "imported",
    origin_detail: str = "",
    file_name: str | None = None,
    content_sha256: str | None = None,
) -> Run:
    """Add the run, its tables and its summary to ``session`` (flushed, not committed)."""
    if strategy is not None and strategy not in list(Strategy):
        raise RunInputError(f"strategy: {strategy!r} is not one of {', '.join(Strategy)}")
    if origin not in ORIGINS:
        raise RunInputError(f"origin: {origin!r} is not one of {', '.join(ORIGINS)}")
    if not name.strip():
        raise RunInputError("name: a run needs a name")
    network = _network_of(session, plan_id)
    tables = {
        "samples": parsed.samples,
        **({"flows": parsed.flows} if parsed.flows is not None else {}),
        **({"rank_times": parsed.rank_times} if parsed.rank_times is not None else {}),
    }
    # Parquet encoding (Arrow's C++, GIL released) runs on the second core while the statistics are computed.
    with ThreadPoolExecutor(max_workers=1) as pool:
        blobs = {kind: pool.submit(_parquet_bytes, table) for kind, table in tables.items()}
        summary = summarise(
            parsed.samples,
            ranks=parsed.ranks,
            network=network,
            flows=parsed.flows,
            reported_avg_busbw=parsed.reported_avg_busbw,
            elements=parsed.elements,
            rank_times=parsed.rank_times,
            rank_unit=parsed.rank_unit,
            rank_basis=parsed.rank_basis,
        )
        encoded = {kind: blob.result() for kind, blob in blobs.items()}
    out_of_range = non_finite_figure(summary)
    if out_of_range is not None:
        raise ResultFileError(f"{file_name or name}: the figure {out_of_range} comes out infinite or not a number")
    kind = run_kind(summary["groups"])
    tags = sorted({t.strip() for t in tags if t.strip()})
    run = Run(
        name=name.strip(),
        plan_id=plan_id,
        strategy=strategy,
        tags=tags,
        source_format=parsed.source_format,
        origin=origin,
        origin_detail=origin_detail,
        file_name=file_name,
        content_sha256=content_sha256,
        sample_count=parsed.samples.num_rows,
        ranks=parsed.ranks,
        hosts=parsed.hosts,
        warnings=list(parsed.warnings),
        kind=kind,
        p50_us=summary["overall"]["p50_us"],
        p99_us=summary["overall"]["p99_us"],
        peak_busbw_gbps=peak_busbw(summary["groups"])[0] if kind == "size-sweep" else None,
        cached_summary=CachedSummary(summary=strip_curves(summary)),
    )
    session.add(run)
    session.flush()
    session.add(RunCurves(run_id=run.id, summary=summary))
    session.add_all(RunTag(run_id=run.id, folded_tag=folded) for folded in {tag.casefold() for tag in tags})
    for kind, table in tables.items():
        session.add(RunTable(run_id=run.id, kind=kind, row_count=table.num_rows, parquet=encoded[kind]))
    session.flush()
    return run


def find_duplicate(session: Session, content_sha256: str) -> Run | None:
    return session.exec(select(Run).where(Run.content_sha256 == content_sha256).order_by(Run.id)).first()


def import_result_file(
    session: Session,
    source: bytes | Path,
    file_name: str,
    *,
    name: str | None = None,
    plan_id: int | None = None,
    strategy: str | None = None,
    tags: Iterable[str] = (),
    fmt: str | None = None,
    column_map: dict[str, str] | None = None,
    collective: str | None = None,
    max_decompressed_bytes: int,
    content_sha256: str | None = None,
) -> Run:
    """Parse a result file (its bytes, or its path: an upload spooled to disk, a file given to the CLI)
    and store it as an imported run; ``DuplicateRun`` if its bytes are known. ``content_sha256`` is the
    digest when the caller already has it (hashed while the upload streamed in).

    Hashing and parsing touch no table, so the write transaction starts only after them."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        # hashlib releases the GIL: hashes while Arrow parses
        digest = pool.submit(sha256_hex, source) if content_sha256 is None else None
        parsed = parse_result_file(
            source, file_name, fmt, column_map, collective=collective, max_decompressed_bytes=max_decompressed_bytes
        )
        digest = content_sha256 if digest is None else digest.result()
    existing = find_duplicate(session, digest)
    if existing is not None:
        raise DuplicateRun(existing, file_name)
    return save_run(
        session,
        parsed,
        name=name or file_name,
        plan_id=plan_id,
        strategy=strategy,
        tags=tags,
        origin="imported",
        file_name=file_name,
        content_sha256=digest,
    )


def get_run(session: Session, run_id: int) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise RunNotFound(run_id)
    return run


def _filtered(query, strategy: str | None, plan_id: int | None, tag: str | None):
    """Strategy and tag match in any case ("Fabric-A" finds "fabric-a")."""
    if strategy:
        query = query.where(func.lower(Run.strategy) == strategy.casefold())
    if plan_id is not None:
        query = query.where(Run.plan_id == plan_id)
    if tag:
        query = query.join(RunTag, col(RunTag.run_id) == Run.id).where(RunTag.folded_tag == tag.casefold())
    return query


def _described(description: str):
    """A field of a run's document with what the API documents of it (``api.runs`` builds its models from
    these dataclasses)."""
    return field(metadata={"description": description})


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What every document of a run holds: the list's item (``ListedRun``) and the whole run (``PublicRun``).
    Plain objects, not the database row: templates read their attributes several times a row, and a row's
    attribute lookup costs more."""

    id: int
    name: str
    plan_id: int | None
    strategy: str | None
    tags: list[str]
    source_format: str
    kind: RunKind
    origin: Origin
    origin_detail: str
    sample_count: int
    created_at: datetime

    def document(self) -> dict:
        """As the API and the CLI's ``--json`` give it: every field, the time as ISO 8601 text."""
        return {
            **{each.name: getattr(self, each.name) for each in fields(self)},
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class ListedRun(RunHeader):
    """What a list shows of a run (``GET /api/runs``, ``emuplan runs --json``): its own small columns, its
    overall median and p99 and, for a size sweep, its peak busbw, never its warnings, its statistics or its
    curves. Lists headline a sweep by its peak busbw and a distribution by its p50: a sweep's p50 pools one
    value per size over every size (8 B and 2 GiB together)."""

    p50_us: float | None = _described("Median completion time over all samples, µs (lower is better).")
    p99_us: float | None = _described("99th-percentile completion time over all samples, µs (lower is better).")
    peak_busbw_gbps: float | None = _described(
        "Size sweeps: the largest busbw cell (as the file printed it, else ours), GB/s (higher is better)."
    )


@dataclass(frozen=True, slots=True)
class PublicRun(RunHeader):
    """The whole run (``GET /api/runs/{id}``, ``emuplan import --json``): with its file, its ranks and hosts,
    its warnings and its statistics (without their curve arrays)."""

    file_name: str | None
    content_sha256: str | None
    ranks: int | None
    hosts: int | None
    warnings: list[str]
    summary: dict


LIST_COLUMNS = tuple(getattr(Run, listed.name) for listed in fields(ListedRun))


def _matching_ids(strategy: str | None, plan_id: int | None, tag: str | None):
    """The ids of the runs the filters match (a query) and the column that orders them newest first."""
    if tag and not strategy and plan_id is None:
        # A tag alone is answered by its index: joined to ``run``, each match would also look up its run row.
        return select(RunTag.run_id).where(RunTag.folded_tag == tag.casefold()), col(RunTag.run_id)
    # With a tag, its index entries are walked in id order (the same ids: they are joined on it).
    return _filtered(select(Run.id), strategy, plan_id, tag), col(RunTag.run_id if tag else Run.id)


def list_runs(
    session: Session,
    *,
    strategy: str | None = None,
    plan_id: int | None = None,
    tag: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    total: int | None = None,
) -> list[ListedRun]:
    """Runs newest first, ``limit`` of them from ``offset`` (all when ``limit`` is None).

    ``total`` is how many runs the filters match (``count_runs``), when the caller has counted them: a page
    in the older half is then read from the oldest end. OFFSET steps over the index entries it skips one by
    one, so page 200 of 10,000 runs steps over 0 of them, not 9,950."""
    ids, id_column = _matching_ids(strategy, plan_id, tag)
    # The page's ids first, then their rows: a page far from the newest skips ids, not rows.
    if limit is not None and total is not None and total - offset - limit < offset:
        if offset >= total:
            return []
        rows = min(limit, total - offset)  # the last page may have fewer
        older_than_page = total - offset - rows
        page = ids.order_by(id_column.asc()).offset(older_than_page).limit(rows)
    else:
        page = ids.order_by(id_column.desc()).offset(offset).limit(limit)
    query = select(*LIST_COLUMNS).where(col(Run.id).in_(page)).order_by(col(Run.id).desc())
    return [ListedRun(*row) for row in session.exec(query)]


def count_runs(
    session: Session, *, strategy: str | None = None, plan_id: int | None = None, tag: str | None = None
) -> int:
    ids, _ = _matching_ids(strategy, plan_id, tag)
    return session.exec(select(func.count()).select_from(ids.subquery())).one()


def delete_run(session: Session, run_id: int) -> None:
    run = get_run(session, run_id)
    # A bulk DELETE, not ORM deletes: the foreign key's ON DELETE CASCADE may already remove these rows.
    session.exec(delete(RunTable).where(RunTable.run_id == run_id))
    session.exec(delete(RunCurves).where(RunCurves.run_id == run_id))
    session.exec(delete(RunTag).where(RunTag.run_id == run_id))
    session.delete(run)
    session.flush()


def load_table(session: Session, run_id: int, kind: str = "samples") -> pa.Table | None:
    stored = session.get(RunTable, (run_id, kind))
    return pq.read_table(io.BytesIO(stored.parquet)) if stored is not None else None


def samples_parquet(session: Session, run_id: int) -> bytes:
    stored = session.get(RunTable, (run_id, "samples"))
    if stored is None:
        raise RunNotFound(run_id)
    return stored.parquet


def load_samples(session: Session, run_id: int) -> pa.Table:
    return pq.read_table(io.BytesIO(samples_parquet(session, run_id)))


def run_public(run: Run) -> dict:
    """The run as the API and ``--json`` CLI show it (summary without its curve arrays)."""
    return PublicRun(**{each.name: getattr(run, each.name) for each in fields(PublicRun)}).document()


@dataclass(frozen=True)
class AssumptionChoice:
    """What the reader asked for (None: take the plan's, the file's or the settings' figure)."""

    link_gbps: float | None = None
    latency_us: float | None = None
    ranks: int | None = None

    def given(self) -> dict:
        """The figures the reader set (for the URLs of pages and their JSON twins)."""
        return {key: value for key, value in asdict(self).items() if value is not None}


def _assumptions_of(
    session: Session, run: Run, choice: AssumptionChoice, settings: Settings
) -> tuple[Assumptions, PlanDocument | None]:
    """The run's assumptions (each from the request, else the linked plan, else the file, else the settings)
    and its linked plan."""
    plan_row = session.get(Plan, run.plan_id) if run.plan_id is not None else None
    plan = plan_document(plan_row) if plan_row else None
    assumptions = resolve_assumptions(
        link_gbps=choice.link_gbps,
        latency_us=choice.latency_us,
        ranks=choice.ranks,
        plan=plan,
        file_ranks=run.ranks,
        default_link_gbps=settings.assumed_link_gbps,
        default_latency_us=settings.assumed_latency_us,
    )
    return assumptions, plan


def run_statistics(session: Session, run: Run, choice: AssumptionChoice, settings: Settings) -> dict:
    """``GET /api/runs/{id}/stats``, ``emuplan stats`` and the run page: the cached statistics of one run
    with rates, % of ideal, the size-sweep view or the slowest trials under the chosen assumptions
    (each from the request, else the linked plan, else the file, else the settings)."""
    assumptions, plan = _assumptions_of(session, run, choice, settings)
    statistics = {
        "run_id": run.id,
        "name": run.name,
        "source_format": run.source_format,
        **run.summary,
        **analyse(run.summary, run.kind, assumptions, plan),
    }
    # The run row keeps the headline; the per-rank and per-host lists sit beside the curves.
    statistics["stragglers"] = (
        summary_with_curves(session, run)["stragglers"] if run.summary.get("stragglers") else None
    )
    return statistics


def summary_with_curves(session: Session, run: Run) -> dict:
    """The run's whole cached summary: statistics, ECDF grids and delay series."""
    return session.get(RunCurves, run.id).summary


def run_figure(
    session: Session, run: Run, kind: FigureKind | str, choice: AssumptionChoice, settings: Settings, **options
) -> dict:
    """One of the ``FigureKind`` figures of a run: curves from ``run_curves``, the rest from the statistics."""
    title = run.name
    if kind == FigureKind.SWEEP:
        statistics = run_statistics(session, run, choice, settings)
        if statistics["kind"] != "size-sweep":
            raise ValueError(
                f"figure: 'sweep' needs a size sweep (at most {SWEEP_MAX_SAMPLES} samples per data size); "
                "this run is a distribution"
            )
        return charts.sweep_figure(statistics["sweep"], title=f"{title}: bandwidth vs data size")
    if kind in (FigureKind.RANKS, FigureKind.HOSTS):
        stragglers = summary_with_curves(session, run).get("stragglers")
        if not stragglers or (kind == FigureKind.HOSTS and not stragglers["hosts"]):
            raise ValueError(
                f"figure: {str(kind)!r} needs a file that times every rank"
                + (" on named hosts" if kind == FigureKind.HOSTS else "")
                + " (nccl-tests -J with -I 1 on several processes, per-flow records, a measured run)"
            )
        unit = stragglers["unit"] if kind == FigureKind.RANKS else "host"
        return charts.straggler_figure(stragglers, kind, title=f"{title}: time per {unit} against the median {unit}")
    log_x = options.get("log_x", False)
    if kind in (FigureKind.CDF, FigureKind.DELAY) and run.kind == "size-sweep":
        # One value (or a few) per size: a CDF step or a delay point at iteration 0 says nothing a sweep does not.
        raise ValueError(
            f"figure: {str(kind)!r} needs a distribution (more than {SWEEP_MAX_SAMPLES} samples of a data size); "
            "this run is a size sweep: see 'sweep'"
        )
    if kind == FigureKind.CDF:
        return charts.cdf_figure(summary_with_curves(session, run), title=f"{title}: completion-time CDF", log_x=log_x)
    if kind == FigureKind.DELAY:
        return charts.delay_figure(
            summary_with_curves(session, run),
            title=f"{title}: completion time per iteration",
            per_size=run.strategy == "pipeline",
            log_y=options.get("log_y", False),
            clip=options.get("clip", False),
        )
    if kind == FigureKind.BANDWIDTH:
        return charts.bandwidth_figure(run.summary, title=f"{title}: bandwidth vs data size")
    raise ValueError(f"figure: {kind!r} is not one of {', '.join(FigureKind)}")


def compare_stored_runs(
    session: Session,
    run_ids: list[int],
    baseline_id: int | None = None,
    *,
    settings: Settings,
    choice: AssumptionChoice = AssumptionChoice(),
    log_x: bool = False,
) -> dict:
    """Statistics with deltas, KS tests, the size sweeps' per-size comparison and the comparison figures for
    stored runs (API, CLI, share pages), each run read as its stored kind. Bandwidths and % of ideal are each
    run's under the chosen assumptions, filled in per run like on its run page (``assumptions`` lists what
    each run got and from where)."""
    stored = [get_run(session, run_id) for run_id in dict.fromkeys(run_ids)]
    with_curves = {r.id: summary_with_curves(session, r) for r in stored}
    summaries, assumptions = [], []
    for r in stored:
        analysis = analyse(r.summary, r.kind, *_assumptions_of(session, r, choice, settings))
        summary = {**with_curves[r.id], "groups": analysis["groups"]}
        summaries.append(RunSummary(r.id, r.name, r.strategy, r.origin, summary, r.kind, analysis.get("sweep")))
        assumptions.append({"run_id": r.id, **analysis["assumptions"]})
    comparison = compare_runs(summaries, baseline_id)
    comparison["assumptions"] = assumptions
    comparison["time_unit"], comparison["us_per_unit"] = page_time_unit([r.summary for r in stored])
    # Each run in its own kind's figures: a sweep's one value per size is a point of a busbw curve, never a
    # CDF step or a delay series at iteration 0.
    sweeps = [(f"#{r.id} {r.name}", with_curves[r.id]) for r in stored if r.kind == "size-sweep"]
    distributions = [(f"#{r.id} {r.name}", with_curves[r.id]) for r in stored if r.kind == "distribution"]
    figures = {"sweeps": charts.comparison_sweep_figure(sweeps)} if sweeps else {}
    if distributions:
        figures |= {
            "cdf": charts.comparison_cdf_figure(distributions, log_x=log_x),
            "small_multiples": charts.comparison_small_multiples(distributions, log_x=log_x),
            "delays": charts.comparison_delay_figure(distributions),
        }
    comparison["figures"] = figures
    return comparison
