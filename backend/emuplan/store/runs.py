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
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import BinaryIO, Literal, get_args

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import delete, exists, func
from sqlmodel import Session, col, select

from emuplan import charts
from emuplan.charts import FigureKind
from emuplan.errors import EmuplanError
from emuplan.results.analysis import (
    SWEEP_MAX_SAMPLES,
    Assumptions,
    RunKind,
    above_ideal_warning,
    analyse,
    page_time_unit,
    peak_busbw,
    resolve_assumptions,
    run_kind,
)
from emuplan.results.budget import DEFAULT_MAX_DECOMPRESSED_BYTES, ROW_BYTES, ImportBudget, ImportLimits
from emuplan.results.canonical import NCCL_TESTS, ParsedResult, ResultFileError, renamed_text
from emuplan.results.compare import RunSummary, compare_runs
from emuplan.results.expected import fabric_of, healthy_time_us
from emuplan.results.nccl_tests import RANKS_INFERRED, ranks_from_bandwidths, ranks_were_inferred
from emuplan.results.observed import OBSERVED_FORMATS, parse_observed
from emuplan.results.parse import parse_result_file
from emuplan.results.plan_vs_observed import ObservedComparisonError, compare_plan_with_observed
from emuplan.results.stats import NetworkModel, collectives_in, non_finite_figure, strip_curves, summarise
from emuplan.results.step_cost import compare_step_costs, observed_step_cost, step_cost
from emuplan.results.streamed import (
    STREAMED_FORMATS,
    StreamedResult,
    parquet_write_options,
    stored_result,
    streamed_result_file,
    streams,
    summarise_streamed,
)
from emuplan.results.verdict import DEGRADED, FAIL, NOT_JUDGED, PASS, judge_summary
from emuplan.settings import Settings
from emuplan.store.db import Database
from emuplan.store.models import (
    CachedSummary,
    Comparison,
    Plan,
    Run,
    RunCollective,
    RunCurves,
    RunFact,
    RunTable,
    RunTag,
    RunTrendFigures,
    utc_now,
)
from emuplan.store.plans import get_plan, plan_document
from emuplan.store.platforms import platform_exists, platform_named, refresh_verdict
from emuplan.store.rows import RunNotFound
from emuplan.store.table_files import ReadReported, drop_stored_table, open_stored_table, store_table_file
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanDocument
from emuplan.workload.plan_options import Strategy
from emuplan.workload.platforms import Platform

# observed: what a training job sent, from its own records (NCCL Inspector, PyTorch profiler).
Origin = Literal["imported", "measured", "generated", "observed"]
ORIGINS = get_args(Origin)
# The limits of a run summarised again by a caller without settings (a plan's deletion).
DEFAULT_LIMITS = ImportLimits()
# Lists show one page of runs at a time, so they cost the same at 10 runs and at 10,000.
RUNS_PER_PAGE = 50
MAX_RUNS_PER_PAGE = 1000


class DuplicateRun(EmuplanError, ValueError):
    http_status = 409

    def __init__(self, existing: Run, file_name: str | None):
        super().__init__(
            f"{file_name or 'this file'}: identical content was already imported "
            f"as run {existing.id} ({existing.name!r})"
        )
        self.existing_run_id = existing.id

    @property
    def http_extra(self) -> dict[str, object]:
        return {"existing_run_id": self.existing_run_id}


class RunInputError(ValueError):
    """A bad field of the import request (strategy, plan, origin) rather than of the file."""


def sha256_hex(source: bytes | Path) -> str:
    if isinstance(source, Path):
        with source.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    return hashlib.sha256(source).hexdigest()


def _parquet_bytes(table: pa.Table) -> bytes:
    """The table as Parquet (``streamed.parquet_write_options``: each column in the encoding made for it)."""
    sink = io.BytesIO()
    pq.write_table(table, sink, **parquet_write_options(table.schema))
    return sink.getvalue()


def _network_of(session: Session, plan_id: int | None) -> NetworkModel | None:
    if plan_id is None:
        return None
    plan = session.get(Plan, plan_id)
    if plan is None:
        raise RunInputError(f"plan_id: no plan with id {plan_id}")
    return NetworkModel.from_plan(plan_document(plan))


def _summarised_and_encoded(
    parsed: ParsedResult, tables: dict[str, pa.Table], network: NetworkModel | None, where: str
) -> tuple[dict, dict[str, bytes]]:
    """The run's summary (``results.stats.summarise``) and ``tables`` as Parquet blobs."""
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
            printed=parsed.printed,
            wrong=parsed.wrong,
            rank_times=parsed.rank_times,
            rank_unit=parsed.rank_unit,
            rank_basis=parsed.rank_basis,
        )
        encoded = {kind: blob.result() for kind, blob in blobs.items()}
    if parsed.observed is not None:
        summary["observed"] = parsed.observed
    _check_finite(summary, where)
    return summary, encoded


def _check_finite(summary: dict, where: str) -> None:
    out_of_range = non_finite_figure(summary)
    if out_of_range is not None:
        raise ResultFileError(f"{where}: the figure {out_of_range} comes out infinite or not a number")


def save_run(
    session: Session,
    parsed: ParsedResult | StreamedResult,
    *,
    name: str,
    plan_id: int | None = None,
    strategy: str | None = None,
    tags: Iterable[str] = (),
    origin: str = "imported",
    origin_detail: str = "",
    file_name: str | None = None,
    content_sha256: str | None = None,
    platform: str | None = None,
    facts: dict[str, str] | None = None,
    note: str = "",
) -> Run:
    """Add the run, its tables and its summary to ``session`` (flushed, not committed). ``platform``: the
    name of the platform profile it ran on (``store.platforms``), None when not said; ``facts``: its fabric
    facts (``checked_facts``). A huge file read streamed (``results.streamed``) is summarised from its tables
    on disk and stored from them."""
    if strategy is not None and strategy not in list(Strategy):
        raise RunInputError(f"strategy: {strategy!r} is not one of {', '.join(Strategy)}")
    if origin not in ORIGINS:
        raise RunInputError(f"origin: {origin!r} is not one of {', '.join(ORIGINS)}")
    if not name.strip():
        raise RunInputError("name: a run needs a name")
    _check_platform(session, platform)
    facts = checked_facts(facts or {})
    if isinstance(parsed, StreamedResult):
        summary = summarise_streamed(parsed, _network_of(session, plan_id))
        _check_finite(summary, file_name or name)
        tables, encoded = {}, {}
    else:
        tables = {
            "samples": parsed.samples,
            **({"flows": parsed.flows} if parsed.flows is not None else {}),
            **({"rank_times": parsed.rank_times} if parsed.rank_times is not None else {}),
        }
        summary, encoded = _summarised_and_encoded(parsed, tables, _network_of(session, plan_id), file_name or name)
    kind = run_kind(summary["groups"])
    tags = checked_tags(tags)
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
        platform=platform,
        sample_count=summary["sample_count"],
        ranks=parsed.ranks,
        hosts=parsed.hosts,
        warnings=list(parsed.warnings),
        kind=kind,
        p50_us=summary["overall"]["p50_us"],
        p99_us=summary["overall"]["p99_us"],
        peak_busbw_gbps=peak_busbw(summary["groups"])[0] if kind == "size-sweep" else None,
        note=checked_note(note),
        facts=facts,
        cached_summary=CachedSummary(summary=strip_curves(summary)),
    )
    refresh_verdict(session, run)
    session.add(run)
    session.flush()
    _set_listed_figures(session, run, summary)
    session.add(RunCurves(run_id=run.id, summary=summary))
    _store_folded(session, run.id, tags, facts)
    for kind, table in tables.items():
        session.add(RunTable(run_id=run.id, kind=kind, row_count=table.num_rows, parquet=encoded[kind]))
    if isinstance(parsed, StreamedResult):
        for kind, path in parsed.tables.items():
            store_table_file(session, run.id, kind, path, parsed.row_counts[kind])
    session.flush()
    return run


def _kept_per_group(summary: dict, key: str, collectives: dict[str, str]) -> dict[tuple[str, int, str], object]:
    """What the import kept of each group under ``key`` (the printed cells, the #wrong count), by its
    (collective, size, variant) after relabelling: the file is not kept, so it cannot be read again."""
    return {
        (collectives.get(group["collective"], group["collective"]), group["size_bytes"], group["variant"]): group[key]
        for group in summary["groups"]
        if key in group
    }


def relabel_collectives(
    session: Session, run_id: int, collectives: dict[str, str], limits: ImportLimits = DEFAULT_LIMITS
) -> Run:
    """Set a run's collectives after import (``{"unknown": "all_reduce"}``: each old name → a ``CollectiveOp``
    value): its samples are rewritten and its statistics computed again as ``save_run`` computes them (bus
    bandwidths, ideal times, rank count inferred from nccl-tests' busbw/algbw factor), in the caller's
    session (flushed, not committed), a huge run in the streamed import's memory (``limits``). Two old names
    given the same new one become one collective."""
    run = get_run(session, run_id)
    check_relabelling(run, collectives)
    return _summarised_again(session, run, collectives, limits)


def check_relabelling(run: Run, collectives: dict[str, str]) -> None:
    """``RunInputError`` unless each old name is one of the run's collectives and each new one a ``CollectiveOp``."""
    present = collectives_in(run.summary)
    if not collectives:
        raise RunInputError("collectives: give at least one 'old name': 'new name' pair")
    for old, new in collectives.items():
        if old not in present:
            raise RunInputError(f"collectives: run {run.id} has no collective {old!r}; it has {', '.join(present)}")
        if new not in list(CollectiveOp):
            raise RunInputError(f"collectives: {new!r} (for {old!r}) is not one of {', '.join(CollectiveOp)}")


def _summarised_again(session: Session, run: Run, collectives: dict[str, str], limits: ImportLimits) -> Run:
    """The run's statistics computed again from its stored samples, as ``save_run`` computes them: after its
    collectives are relabelled (``collectives``: old name → new) or its plan, whose network gives the ideal
    times, changed (``collectives`` empty). A run too large to load (``_summarised_streamed``) is summarised
    from its tables copied to disk, as a streamed import is; one loaded whole holds its rows in the imports'
    shared pool meanwhile, as its import did (503 when the imports in flight hold it)."""
    network = _network_of(session, run.plan_id)
    with ImportBudget(limits) as budget:
        if _summarised_streamed(session, run, limits):
            ranks, warnings = run.ranks, list(run.warnings)
            opened = partial(open_stored_table, session, run.id)
            with _streamed_summary(session, run, collectives, network, budget, opened) as (summary, result):
                if collectives:
                    _store_samples_again(session, run.id, result)
        else:
            budget.count_rows(_stored_rows(session, run.id), run.file_name or run.name)
            summary, ranks, warnings = _summary_again_in_memory(session, run, collectives, network)
    return _with_summary(session, run, summary, ranks, warnings, collectives)


def _with_summary(
    session: Session, run: Run, summary: dict, ranks: int | None, warnings: list[str], collectives: dict[str, str]
) -> Run:
    """The run with its statistics computed again (``summary``) in place of the old ones, flushed."""
    if collectives:
        relabelled_names = ", ".join(f"{old} → {new}" for old, new in collectives.items())
        warnings.append(f"collective set after import: {relabelled_names}")
    run.ranks, run.warnings = ranks, warnings
    run.p50_us, run.p99_us = summary["overall"]["p50_us"], summary["overall"]["p99_us"]
    # Two collectives relabelled as one may give a size more values: the kind and headline follow.
    run.kind = run_kind(summary["groups"])
    run.peak_busbw_gbps = peak_busbw(summary["groups"])[0] if run.kind == "size-sweep" else None
    _set_listed_figures(session, run, summary)
    refresh_verdict(session, run)
    run.cached_summary.summary = strip_curves(summary)
    session.get(RunCurves, run.id).summary = summary
    session.add(run)
    session.flush()
    return run


def _stored_rows(session: Session, run_id: int) -> int:
    """The rows of every table of the run (a table stored in parts counts them in its first), what loading them
    whole holds ``ROW_BYTES`` each of."""
    counts = session.exec(select(func.sum(RunTable.row_count)).where(RunTable.run_id == run_id)).one()
    return int(counts or 0)


def _summarised_streamed(session: Session, run: Run, limits: ImportLimits) -> bool:
    """Whether the run is summarised again streamed: a per-iteration or per-flow run (what the streamed
    summary covers; not one whose file timed every rank) whose samples and flows would hold more than
    ``limits.streamed_above_bytes`` loaded whole (``ROW_BYTES`` a row, as an import counts them)."""
    if run.source_format not in STREAMED_FORMATS:
        return False
    stored = dict(session.exec(select(RunTable.kind, RunTable.row_count).where(RunTable.run_id == run.id)).all())
    rows = stored.get("samples", 0) + stored.get("flows", 0)
    return "rank_times" not in stored and rows * ROW_BYTES > limits.streamed_above_bytes


@contextmanager
def _streamed_summary(
    session: Session,
    run: Run,
    collectives: dict[str, str],
    network: NetworkModel | None,
    budget: ImportBudget,
    open_table: Callable[[str], AbstractContextManager[BinaryIO]],
    copied: Callable[[], None] = lambda: None,
) -> Iterator[tuple[dict, StreamedResult]]:
    """The summary from the run's tables (``open_table(kind)``) copied to disk a row group at a time
    (``streamed.stored_result``; ``copied()`` once they are) and the copy, whose relabelled samples are there to
    store until the exit."""
    kinds = ["samples", *(["flows"] if _has_table(session, run.id, "flows") else [])]
    where = run.file_name or run.name
    with stored_result(
        run.source_format,
        open_table,
        kinds,
        collectives,
        file_name=where,
        ranks=run.ranks,
        hosts=run.hosts,
        budget=budget,
    ) as result:
        copied()
        summary = summarise_streamed(result, network)
        _check_finite(summary, where)
        yield summary, result


def _store_samples_again(session: Session, run_id: int, result: StreamedResult) -> None:
    drop_stored_table(session, run_id, "samples")
    store_table_file(session, run_id, "samples", result.tables["samples"], result.row_counts["samples"])


def summarised_again_in_background(session: Session, run_id: int, limits: ImportLimits) -> bool:
    """Whether relabelling the run or changing its plan summarises it again streamed (``_summarised_streamed``),
    which takes minutes at 100 M rows: a job (``api/relabel_jobs.py``) rather than a request's work."""
    return _summarised_streamed(session, get_run(session, run_id), limits)


def stored_table_bytes(session: Session, run_id: int) -> int:
    """The bytes of the run's stored tables (every part), what summarising it again streamed reads."""
    return int(
        session.exec(select(func.sum(func.length(RunTable.parquet))).where(RunTable.run_id == run_id)).one() or 0
    )


def summarise_again_streamed(
    database: Database,
    run_id: int,
    collectives: dict[str, str],
    plan_id: int | None,
    limits: ImportLimits,
    *,
    on_read: Callable[[int], None],
    on_stage: Callable[[str], None],
    in_last_transaction: Callable[[Session], None],
) -> None:
    """A relabel job's work: the huge run's statistics computed again with ``collectives`` renamed (may be empty)
    and linked to ``plan_id`` (None: no plan), as ``relabel_collectives`` and ``update_run`` compute them. Its
    tables are read in a read session, ``on_read(size)`` told of each read (it may raise to cancel);
    ``on_stage("summarising")`` and ``on_stage("saving")`` are called as the work moves on (they may raise to
    cancel). The run changes only in the last transaction, which stores the relabelled samples, the statistics
    and the plan link at once, with ``in_last_transaction(session)`` (the job's end, or a raise if it was
    cancelled): a failure or a cancel before it leaves the run as it was."""

    def open_watched(kind: str, reading: Session):
        @contextmanager
        def opened() -> Iterator[BinaryIO]:
            with open_stored_table(reading, run_id, kind) as stored:
                yield ReadReported(stored, on_read)

        return opened()

    with database.read_session() as reading:
        run = get_run(reading, run_id)
        if collectives:
            check_relabelling(run, collectives)
        network = _network_of(reading, plan_id)
        opened = partial(open_watched, reading=reading)
        with (
            ImportBudget(limits) as budget,
            _streamed_summary(reading, run, collectives, network, budget, opened, lambda: on_stage("summarising")) as (
                summary,
                result,
            ),
        ):
            on_stage("saving")
            with database.writing() as session:
                run = get_run(session, run_id)
                if plan_id is not None:
                    get_plan(session, plan_id)
                run.plan_id = plan_id
                if collectives:
                    _store_samples_again(session, run_id, result)
                _with_summary(session, run, summary, run.ranks, list(run.warnings), collectives)
                in_last_transaction(session)


def _summary_again_in_memory(
    session: Session, run: Run, collectives: dict[str, str], network: NetworkModel | None
) -> tuple[dict, int | None, list[str]]:
    """The summary from the run's tables loaded whole, its samples stored again; the run's ranks and warnings
    (an nccl-tests run relabelled to one collective may have its rank count inferred)."""
    run_id = run.id
    samples = load_samples(session, run_id)
    ranks, warnings = run.ranks, list(run.warnings)
    if collectives:
        relabelled = renamed_text(samples["collective"].combine_chunks(), lambda name: collectives.get(name, name))
        samples = samples.set_column(samples.schema.get_field_index("collective"), "collective", relabelled)
        distinct = relabelled.dictionary.to_pylist()
        if ranks is None and run.source_format == NCCL_TESTS and len(distinct) == 1:
            algbws, busbws = (samples[name].to_numpy(zero_copy_only=False) for name in ("algbw_gbps", "busbw_gbps"))
            ranks = ranks_from_bandwidths(distinct[0], list(algbws), list(busbws))
            if ranks is not None:
                warnings.append(f"{ranks} {RANKS_INFERRED} the busbw/algbw factor of {distinct[0]}")
    curves = summary_with_curves(session, run)
    stragglers = curves.get("stragglers") or {}
    parsed = ParsedResult(
        samples=samples,
        source_format=run.source_format,
        ranks=ranks,
        hosts=run.hosts,
        warnings=warnings,
        flows=load_table(session, run_id, "flows"),
        reported_avg_busbw={
            collectives.get(name, name): busbw for name, busbw in run.summary["reported_avg_busbw_gbps"].items()
        },
        elements={
            (collectives.get(group["collective"], group["collective"]), group["size_bytes"]): (
                group["elements"],
                group["dtype"],
            )
            for group in run.summary["groups"]
            if "elements" in group
        },
        printed=_kept_per_group(run.summary, "printed", collectives),
        wrong=_kept_per_group(run.summary, "wrong", collectives),
        rank_times=load_table(session, run_id, "rank_times"),
        rank_unit=stragglers.get("unit", "rank"),
        rank_basis=stragglers.get("basis", ""),
        observed=_relabelled_observed(run.summary.get("observed"), collectives),
    )
    summary, encoded = _summarised_and_encoded(parsed, {"samples": samples}, network, run.file_name or run.name)
    # A table stored in parts is stored again as one.
    drop_stored_table(session, run_id, "samples")
    session.add(RunTable(run_id=run_id, kind="samples", row_count=samples.num_rows, parquet=encoded["samples"]))
    return summary, parsed.ranks, parsed.warnings


def _relabelled_observed(observed: dict | None, collectives: dict[str, str]) -> dict | None:
    """An observed run's record with its groups' collectives renamed as the samples are."""
    if observed is None:
        return None
    groups = [
        {**group, "collective": collectives.get(group["collective"], group["collective"])}
        for group in observed["groups"]
    ]
    return {**observed, "groups": groups}


def _check_platform(session: Session, platform: str | None) -> None:
    if platform is not None and not platform_exists(session, platform):
        raise RunInputError(f"platform: no platform named {platform!r} (GET /api/platforms lists them)")


# Each tag of a run makes its own series on /metrics (per platform, ranks and collective): 8,000 tags in one form
# field and 50 runs made one scrape 180 MB, 1.6 M samples, 24 s.
MAX_TAGS = 20
MAX_TAG_LENGTH = 64
MAX_FACTS = 40
MAX_FACT_KEY = 64
MAX_FACT_VALUE = 200
MAX_NOTE = 4000


def checked_facts(facts: dict[str, str]) -> dict[str, str]:
    """A run's fabric facts (key → value, e.g. ``{"nic": "ConnectX-7", "nccl": "2.21.5"}``) trimmed, or
    ``RunInputError`` naming the fact that is wrong. Keys are unique in any case ("NIC" and "nic" are one)."""
    checked: dict[str, str] = {}
    for key, value in facts.items():
        key, value = str(key).strip(), str(value).strip()
        if not key or len(key) > MAX_FACT_KEY or "=" in key:
            raise RunInputError(f"facts: {key!r}: a key is 1 to {MAX_FACT_KEY} characters without '='")
        if not value or len(value) > MAX_FACT_VALUE:
            raise RunInputError(f"facts: {key}: give a value of 1 to {MAX_FACT_VALUE} characters")
        if key.casefold() in {known.casefold() for known in checked}:
            raise RunInputError(f"facts: {key!r} is given twice")
        checked[key] = value
    if len(checked) > MAX_FACTS:
        raise RunInputError(f"facts: at most {MAX_FACTS} facts a run, got {len(checked)}")
    return checked


def facts_from_lines(lines: Iterable[str]) -> dict[str, str]:
    """``key = value`` lines (the run page's box, ``emuplan runs edit --fact``) as facts; blank lines skipped."""
    facts: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        key, equals, value = line.partition("=")
        if not equals:
            raise RunInputError(f"facts: line {number} ({line.strip()!r}) is not 'key = value'")
        if key.strip() in facts:
            raise RunInputError(f"facts: {key.strip()!r} is given twice")
        facts[key.strip()] = value.strip()
    return checked_facts(facts)


def checked_note(note: str) -> str:
    if len(note) > MAX_NOTE:
        raise RunInputError(f"note: at most {MAX_NOTE} characters, got {len(note)}")
    return note.strip()


def checked_tags(tags: Iterable[str]) -> list[str]:
    """Tags trimmed, empty ones dropped, each once, sorted; at most ``MAX_TAGS`` of ``MAX_TAG_LENGTH`` characters."""
    checked = sorted({tag.strip() for tag in tags if tag.strip()})
    if len(checked) > MAX_TAGS:
        raise RunInputError(f"tags: at most {MAX_TAGS} tags a run, got {len(checked)}")
    for tag in checked:
        if len(tag) > MAX_TAG_LENGTH:
            raise RunInputError(f"tags: {tag[:20]!r}… is {len(tag)} characters long, at most {MAX_TAG_LENGTH}")
    return checked


def _set_listed_figures(session: Session, run: Run, summary: dict) -> None:
    """What the list shows of the statistics beside the headline: the collectives (and their rows in
    ``run_collective``, which the list's filter reads) and the range of sizes. ``run`` has its id."""
    run.collectives = collectives_in(summary)
    run.first_collective = run.collectives[0] if run.collectives else None
    session.exec(delete(RunCollective).where(RunCollective.run_id == run.id))
    session.add_all(RunCollective(run_id=run.id, collective=name) for name in run.collectives)
    sizes = [group["size_bytes"] for group in summary["groups"] if group.get("size_bytes") is not None]
    run.size_min_bytes, run.size_max_bytes = min(sizes, default=None), max(sizes, default=None)


def _store_folded(session: Session, run_id: int, tags: list[str], facts: dict[str, str]) -> None:
    """The case-folded tags and facts the list's filters look up (``run_tag``, ``run_fact``), replacing any."""
    session.exec(delete(RunTag).where(RunTag.run_id == run_id))
    session.exec(delete(RunFact).where(RunFact.run_id == run_id))
    session.add_all(RunTag(run_id=run_id, folded_tag=folded) for folded in {tag.casefold() for tag in tags})
    session.add_all(
        RunFact(run_id=run_id, folded_key=key.casefold(), folded_value=value.casefold()) for key, value in facts.items()
    )


def set_run_platform(session: Session, run_id: int, platform: str | None) -> Run:
    """Name the platform a run ran on (None: none), in the caller's session: its expected curve, % of
    expected and verdict follow on every page, computed when read."""
    run = get_run(session, run_id)
    _check_platform(session, platform)
    run.platform = platform
    refresh_verdict(session, run)
    session.add(run)
    session.flush()
    return run


def find_duplicate(session: Session, content_sha256: str) -> Run | None:
    return session.exec(select(Run).where(Run.content_sha256 == content_sha256).order_by(Run.id)).first()


def refuse_duplicate(session: Session, content_sha256: str, file_name: str) -> None:
    """``DuplicateRun`` if a run holds content of this digest: before any parsing, on a read session, so that a
    duplicate is refused at once and no write lock is held while a file is read (the write transaction checks
    again as it stores)."""
    existing = find_duplicate(session, content_sha256)
    if existing is not None:
        raise DuplicateRun(existing, file_name)


def job_digest(file_digests: Iterable[str]) -> str:
    """One training job's digest from its files' SHA-256 (hex), whatever their order."""
    return hashlib.sha256("".join(sorted(file_digests)).encode()).hexdigest()


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
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    content_sha256: str | None = None,
    platform: str | None = None,
    budget: ImportBudget | None = None,
    facts: dict[str, str] | None = None,
) -> Run:
    """Parse a result file (its bytes, or its path: an upload spooled to disk, a file given to the CLI)
    and store it as an imported run; ``DuplicateRun`` if its bytes are known. ``content_sha256`` is the
    digest when the caller already has it (hashed while the upload streamed in); ``budget``: the import's
    memory account (``parse_result_file``), which then caps instead of ``max_decompressed_bytes``.

    A table large enough (``results.streamed``) is read a block at a time into Parquet on disk and summarised from
    there, in memory that does not grow with it. Hashing and parsing touch no table, so the write transaction
    starts only after them: ``session`` is first used to store. A caller that knows the digest checks it first
    on a read session (``refuse_duplicate``)."""
    if budget is None:
        with ImportBudget(ImportLimits(max_decompressed_bytes=max_decompressed_bytes)) as own:
            return import_result_file(
                session, source, file_name, name=name, plan_id=plan_id, strategy=strategy, tags=tags, fmt=fmt,
                column_map=column_map, collective=collective, content_sha256=content_sha256, platform=platform,
                budget=own, facts=facts,
            )  # fmt: skip
    if streams(source, fmt, budget):
        with ThreadPoolExecutor(max_workers=1) as pool:
            hashing = pool.submit(sha256_hex, source) if content_sha256 is None else None
            with streamed_result_file(source, file_name, fmt, column_map, collective, budget) as streamed:
                content_sha256 = content_sha256 if hashing is None else hashing.result()
                if streamed is not None:
                    return _save_new(
                        session, streamed, content_sha256, file_name, name, plan_id, strategy, tags, platform, facts
                    )
    with ThreadPoolExecutor(max_workers=1) as pool:
        # hashlib releases the GIL: hashes while Arrow parses
        digest = pool.submit(sha256_hex, source) if content_sha256 is None else None
        parsed = parse_result_file(
            source,
            file_name,
            fmt,
            column_map,
            collective=collective,
            max_decompressed_bytes=max_decompressed_bytes,
            budget=budget,
        )
        digest = content_sha256 if digest is None else digest.result()
    return _save_new(session, parsed, digest, file_name, name, plan_id, strategy, tags, platform, facts)


def import_observed_files(
    session: Session,
    paths: list[Path],
    *,
    name: str | None = None,
    plan_id: int | None = None,
    tags: Iterable[str] = (),
    fmt: str | None = None,
    budget: ImportBudget,
    platform: str | None = None,
    facts: dict[str, str] | None = None,
) -> Run:
    """The files of one training job (an NCCL Inspector dump per process, a profiler trace per rank) as one
    observed run, within the import's ``budget``; ``DuplicateRun`` when the same files were imported before (in
    any order)."""
    files = []
    for path in paths:
        budget.holds(path.stat().st_size, path.name)
        files.append((path.name, path.read_bytes()))
    parsed = parse_observed(files, fmt, budget=budget)
    digest = job_digest(sha256_hex(content) for _, content in files)
    file_name = f"{files[0][0]} and {len(files) - 1} more"
    return _save_new(session, parsed, digest, file_name, name, plan_id, None, tags, platform, facts)


def _save_new(session, parsed, digest, file_name, name, plan_id, strategy, tags, platform, facts) -> Run:
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
        origin="observed" if parsed.source_format in OBSERVED_FORMATS else "imported",
        file_name=file_name,
        content_sha256=digest,
        platform=platform,
        facts=facts,
    )


def get_run(session: Session, run_id: int) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise RunNotFound(run_id)
    return run


@dataclass(frozen=True)
class RunFilters:
    """What the runs list (page, ``GET /api/runs``, ``emuplan runs``) filters by; None: any. Text matches in
    any case ("Fabric-A" finds "fabric-a"); ``fact`` is ``key=value`` or a ``key`` the run states at all;
    ``size`` a data size in bytes within the run's range; ``text`` a part of the name."""

    strategy: str | None = None
    plan_id: int | None = None
    tag: str | None = None
    collective: str | None = None
    platform: str | None = None
    verdict: str | None = None
    kind: str | None = None
    ranks: int | None = None
    hosts: int | None = None
    size: int | None = None
    fact: str | None = None
    text: str | None = None

    def given(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value not in (None, "")}


def _filtered(query, filters: RunFilters):
    if filters.strategy:
        query = query.where(func.lower(Run.strategy) == filters.strategy.casefold())
    if filters.plan_id is not None:
        query = query.where(Run.plan_id == filters.plan_id)
    if filters.tag:
        query = query.join(RunTag, col(RunTag.run_id) == Run.id).where(RunTag.folded_tag == filters.tag.casefold())
    if filters.collective:
        # Checked per run through run_collective's primary key while an index of run is walked.
        query = query.where(
            exists().where(col(RunCollective.run_id) == Run.id, col(RunCollective.collective) == filters.collective)
        )
    for column, value in ((Run.platform, filters.platform), (Run.verdict, filters.verdict), (Run.kind, filters.kind)):
        if value:
            query = query.where(column == value)
    for column, value in ((Run.ranks, filters.ranks), (Run.hosts, filters.hosts)):
        if value is not None:
            query = query.where(column == value)
    if filters.size is not None:
        query = query.where(col(Run.size_min_bytes) <= filters.size, col(Run.size_max_bytes) >= filters.size)
    if filters.fact:
        key, equals, value = filters.fact.partition("=")
        query = query.join(RunFact, col(RunFact.run_id) == Run.id).where(RunFact.folded_key == key.strip().casefold())
        if equals:
            query = query.where(RunFact.folded_value == value.strip().casefold())
    if filters.text:
        query = query.where(func.lower(Run.name).contains(filters.text.casefold(), autoescape=True))
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
    platform: str | None
    sample_count: int
    ranks: int | None
    hosts: int | None
    collectives: list[str] = _described("The collectives of its groups, in their order.")
    size_min_bytes: int | None = _described("Its smallest data size, bytes.")
    size_max_bytes: int | None = _described("Its largest data size, bytes.")
    facts: dict[str, str] = _described(
        "Fabric facts as stated (topology, NIC, switch, firmware, NCCL version…): key → value."
    )
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
    verdict: str | None = _described(
        "pass, degraded, fail or not judged (its reasons: GET /api/runs/{id}/stats); judged again when its platform, "
        "ranks or statistics change."
    )
    peak_busbw_gbps: float | None = _described(
        "Size sweeps: the largest busbw cell (as the file printed it, else ours), GB/s (higher is better)."
    )


@dataclass(frozen=True, slots=True)
class PublicRun(RunHeader):
    """The whole run (``GET /api/runs/{id}``, ``emuplan import --json``): with its file, its ranks and hosts,
    its warnings and its statistics (without their curve arrays)."""

    file_name: str | None
    content_sha256: str | None
    note: str
    warnings: list[str]
    summary: dict
    measured_at: datetime | None = _described(
        "When it was measured, where given (upload, --measured-at, PATCH); a series orders runs by it, else by when "
        "they were imported."
    )

    def document(self) -> dict:
        measured_at = None if self.measured_at is None else self.measured_at.isoformat()
        return {**RunHeader.document(self), "measured_at": measured_at}


LIST_COLUMNS = tuple(getattr(Run, listed.name) for listed in fields(ListedRun))

RunSort = Literal["newest", "oldest", "name", "p50", "busbw", "ranks", "size", "verdict", "platform", "collective"]
RUN_SORTS: tuple[str, ...] = get_args(RunSort)
# Each sort by a figure: its column and whether it runs downwards; ties go by id the same way, so that each reads
# its (column, id) index (migrations 0017, 0018). Runs without the figure come last either way.
SORT_COLUMNS = {
    "name": (Run.name, False),
    "p50": (Run.p50_us, False),
    "busbw": (Run.peak_busbw_gbps, True),
    "ranks": (Run.ranks, True),
    "size": (Run.size_max_bytes, True),
    "platform": (Run.platform, False),
    "collective": (Run.first_collective, False),
}
# Worst first: the runs that need a look lead, then the unjudged. Not the verdicts' alphabetical order
# (degraded, fail, pass), which would put the failures between the others.
VERDICT_ORDER = (FAIL, DEGRADED, PASS, NOT_JUDGED)


def _matching_ids(filters: RunFilters):
    """The ids of the runs the filters match (a query) and the column that orders them newest first."""
    given = filters.given().keys()
    # A tag or a collective alone is answered by its index: joined to ``run``, each match would also look up its
    # run row (counting 10,000 matches would read 10,000 rows).
    if given == {"tag"}:
        return select(RunTag.run_id).where(RunTag.folded_tag == filters.tag.casefold()), col(RunTag.run_id)
    if given == {"collective"}:
        matching = select(RunCollective.run_id).where(RunCollective.collective == filters.collective)
        return matching, col(RunCollective.run_id)
    # With a tag, its index entries are walked in id order (the same ids: they are joined on it).
    return _filtered(select(Run.id), filters), col(RunTag.run_id if filters.tag else Run.id)


def _ascending(column):
    return col(column).asc()


def _descending(column):
    return col(column).desc()


def _sort_parts(matching, sort: str) -> list:
    """The runs ``matching`` in the ``sort`` order as consecutive parts, each walking one index in one direction:
    by a figure, the runs with it in (column, id) order, then those without by id the same way; by verdict, each
    verdict newest first through (verdict, id), then the unjudged. (SQLite puts NULL first in an index,
    PostgreSQL last: one ORDER BY … NULLS LAST, or a CASE over the verdicts, would sort every matching run.)"""
    if sort == "oldest":
        return [matching.order_by(col(Run.id).asc())]
    if sort == "verdict":
        judged = [matching.where(Run.verdict == verdict) for verdict in VERDICT_ORDER]
        return [part.order_by(col(Run.id).desc()) for part in [*judged, matching.where(col(Run.verdict).is_(None))]]
    column, downwards = SORT_COLUMNS[sort]
    direction = _descending if downwards else _ascending
    with_figure = matching.where(col(column).is_not(None)).order_by(direction(column), direction(Run.id))
    return [with_figure, matching.where(col(column).is_(None)).order_by(direction(Run.id))]


def _sorted_ids(session: Session, filters: RunFilters, sort: str, limit: int | None, offset: int) -> list[int]:
    """A page of ids in a sort other than newest first, read part by part (``_sort_parts``): a part is counted
    only when the page starts past its end."""
    page: list[int] = []
    skip = offset
    for part in _sort_parts(_filtered(select(Run.id), filters), sort):
        read = list(session.exec(part.offset(skip).limit(None if limit is None else limit - len(page))))
        page += read
        if limit is not None and len(page) == limit:
            break
        # This part ended before the page did; if the page starts past its end, how far past.
        if skip and not read:
            skip -= session.exec(select(func.count()).select_from(part.order_by(None).subquery())).one()
        else:
            skip = 0
    return page


def check_sort(sort: str) -> None:
    if sort not in RUN_SORTS:
        raise RunInputError(f"sort: {sort!r} is not one of {', '.join(RUN_SORTS)}")


def list_runs(
    session: Session,
    filters: RunFilters = RunFilters(),
    *,
    sort: RunSort = "newest",
    limit: int | None = None,
    offset: int = 0,
    total: int | None = None,
) -> list[ListedRun]:
    """Runs matching ``filters`` in the ``sort`` order (newest first by default), ``limit`` of them from
    ``offset`` (all when ``limit`` is None).

    ``total`` is how many runs the filters match (``count_runs``), when the caller has counted them exactly: a page
    in the older half of a newest-first list is then read from the oldest end. OFFSET steps over the index
    entries it skips one by one, so page 200 of 10,000 runs steps over 0 of them, not 9,950."""
    check_sort(sort)
    if sort != "newest":
        page = _sorted_ids(session, filters, sort, limit, offset)
        rows = {row[0]: ListedRun(*row) for row in session.exec(select(*LIST_COLUMNS).where(col(Run.id).in_(page)))}
        return [rows[run_id] for run_id in page]
    ids, id_column = _matching_ids(filters)
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


# PostgreSQL counts runs exactly up to this many matches, then estimates: its count visits every match's row (an
# index alone does not say which rows this transaction sees), ~0.2 µs a run, the part of a list page that grew
# with the runs. SQLite counts every match in an index of the ids (``ix_run_id``) and stays exact.
EXACT_COUNT_LIMIT = 1000


@dataclass(frozen=True)
class RunCount:
    """How many runs the filters match: ``value`` is ``exact``, or PostgreSQL's estimate of a count past
    ``EXACT_COUNT_LIMIT`` (its planner's, from the statistics autovacuum keeps: "about N" on pages)."""

    value: int
    exact: bool


def count_runs(session: Session, filters: RunFilters = RunFilters()) -> RunCount:
    ids, _ = _matching_ids(filters)
    if session.connection().dialect.name != "postgresql":
        return RunCount(session.exec(select(func.count()).select_from(ids.subquery())).one(), exact=True)
    bounded = ids.limit(EXACT_COUNT_LIMIT + 1).subquery()
    counted = session.exec(select(func.count()).select_from(bounded)).one()
    if counted <= EXACT_COUNT_LIMIT:
        return RunCount(counted, exact=True)
    # More than the limit are known to match: the estimate never says fewer.
    return RunCount(max(EXACT_COUNT_LIMIT + 1, _planned_rows(session, ids)), exact=False)


def _planned_rows(session: Session, query) -> int:
    """How many rows PostgreSQL's planner expects ``query`` to return (``EXPLAIN``: nothing is read)."""
    connection = session.connection()
    compiled = query.compile(dialect=connection.dialect)
    explained = connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {compiled}", compiled.params).scalar_one()
    return round(explained[0]["Plan"]["Plan Rows"])


@dataclass(frozen=True)
class RunEdits:
    """What ``update_run`` changes of a run: each field None stays as it is. ``plan_id`` 0 unlinks the plan."""

    name: str | None = None
    tags: list[str] | None = None
    note: str | None = None
    facts: dict[str, str] | None = None
    plan_id: int | None = None
    measured_at: datetime | None = None


def checked_measured_at(moment: datetime) -> datetime:
    """When a run was measured, in UTC: a time without its offset is refused rather than guessed."""
    if moment.tzinfo is None:
        raise RunInputError(f"measured_at: {moment.isoformat()} has no UTC offset; add one (Z for UTC)")
    if moment > utc_now():
        raise RunInputError(f"measured_at: {moment.isoformat()} is in the future")
    return moment.astimezone(UTC)


def update_run(session: Session, run_id: int, changes: RunEdits, limits: ImportLimits = DEFAULT_LIMITS) -> Run:
    """Rename, retag, annotate, state its facts, link it to a plan or unlink it (in the caller's session,
    flushed): linking or unlinking computes its statistics again (a huge run in the streamed import's memory,
    ``limits``), since the plan's network gives its ideal times, and judges it again, since the plan's GPUs
    give its rank count."""
    run = get_run(session, run_id)
    if changes.name is not None:
        if not changes.name.strip():
            raise RunInputError("name: a run needs a name")
        run.name = changes.name.strip()[:200]
    if changes.note is not None:
        run.note = checked_note(changes.note)
    if changes.measured_at is not None:
        run.measured_at = checked_measured_at(changes.measured_at)
    if changes.tags is not None or changes.facts is not None:
        run.tags = checked_tags(changes.tags) if changes.tags is not None else run.tags
        run.facts = checked_facts(changes.facts) if changes.facts is not None else run.facts
        _store_folded(session, run.id, run.tags, run.facts)
    session.add(run)
    if changes.plan_id is not None:
        plan_id = changes.plan_id or None
        if plan_id is not None:
            get_plan(session, plan_id)
        if plan_id != run.plan_id:
            run.plan_id = plan_id
            _summarised_again(session, run, {}, limits)
    session.flush()
    return run


def comparisons_with(session: Session, run_id: int) -> list[Comparison]:
    """The saved comparisons that show this run (a few rows: each holds its run ids as a JSON list)."""
    comparisons = session.exec(select(Comparison).order_by(col(Comparison.id))).all()
    return [comparison for comparison in comparisons if run_id in comparison.run_ids]


def run_deletion(session: Session, run_id: int) -> dict:
    """What deleting the run does besides, for its page's confirmation and the CLI's question: the saved
    comparisons it is in (they show the rest of their runs; one left without runs says so, and its share
    links answer 410)."""
    get_run(session, run_id)
    return {
        "run_id": run_id,
        "comparisons": [
            {"id": c.id, "name": c.name, "runs_left": len(c.run_ids) - 1} for c in comparisons_with(session, run_id)
        ],
    }


def delete_run(session: Session, run_id: int) -> dict:
    """Delete the run with its tables, statistics, tags and facts; returns ``run_deletion``'s account."""
    consequences = run_deletion(session, run_id)
    run = get_run(session, run_id)
    # A bulk DELETE, not ORM deletes: the foreign key's ON DELETE CASCADE may already remove these rows.
    for table in (RunTable, RunCurves, RunTag, RunFact, RunCollective, RunTrendFigures):
        session.exec(delete(table).where(table.run_id == run_id))
    session.delete(run)
    session.flush()
    return consequences


def load_table(session: Session, run_id: int, kind: str = "samples") -> pa.Table | None:
    """The run's ``kind`` table whole (None when it has none), its parts joined (``store.table_files``)."""

    if not _has_table(session, run_id, kind):
        return None
    with open_stored_table(session, run_id, kind) as stored:
        return pq.read_table(stored)


def _has_table(session: Session, run_id: int, kind: str) -> bool:
    return (
        session.exec(select(RunTable.row_count).where(RunTable.run_id == run_id, RunTable.kind == kind)).first()
        is not None
    )


def samples_parquet(session: Session, run_id: int) -> bytes:
    """The run's samples table as Parquet bytes, its parts joined."""

    with open_stored_table(session, run_id) as stored:
        return stored.read()


def load_samples(session: Session, run_id: int) -> pa.Table:
    samples = load_table(session, run_id)
    if samples is None:
        raise RunNotFound(run_id)
    return samples


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


@dataclass(frozen=True)
class ReadingPlan:
    """The plan a view reads a run with: the one the reader chose for it, else the run's linked plan."""

    row: Plan
    document: PlanDocument
    source: Literal["chosen", "linked"]

    @property
    def linked_document(self) -> PlanDocument | None:
        """The plan's document when it is the run's own: only then do its network and GPUs stand for the run's
        (a plan chosen to read a run with is a what-if: its step on the run's fabric, whose figures stay)."""
        return self.document if self.source == "linked" else None

    def header(self) -> dict:
        """What a step cost names of its plan."""
        return {
            "id": self.row.id,
            "name": self.row.name,
            "strategy": self.row.strategy,
            "mode": self.row.mode,
            "trials": self.row.trials,
            "source": self.source,
        }


def reading_plan(session: Session, run: Run, plan_id: int | None = None) -> ReadingPlan | None:
    if plan_id is not None and plan_id != run.plan_id:
        row = get_plan(session, plan_id)
        return ReadingPlan(row, plan_document(row), "chosen")
    row = session.get(Plan, run.plan_id) if run.plan_id is not None else None
    return ReadingPlan(row, plan_document(row), "linked") if row is not None else None


def observed_against_plan(session: Session, run: Run, plan_id: int | None = None, steps: int | None = None) -> dict:
    """``GET /api/runs/{id}/observed-vs-plan`` and ``emuplan observed``: an observed run against a plan (``plan_id``,
    else its linked one), per step (``results.plan_vs_observed``), with the plan named."""
    observed = run.summary.get("observed")
    if observed is None:
        raise ObservedComparisonError(f"run {run.id} is not an observed run (import an NCCL Inspector dump or a trace)")
    plan = reading_plan(session, run, plan_id)
    if plan is None:
        raise ObservedComparisonError(f"run {run.id} has no linked plan: name one (plan=ID)")
    comparison = compare_plan_with_observed(plan.document, observed, steps=steps)
    return {"run_id": run.id, "plan_id": plan.row.id, "plan_name": plan.row.name, **comparison}


def observed_on_page(session: Session, run: Run, plan_id: int | None = None) -> dict | None:
    """The run page's "observed in training" section: the run's ``observed`` record and its comparison with the
    chosen or linked plan, or why there is none (``note``); None for a run that was not observed."""
    observed = run.summary.get("observed")
    if observed is None:
        return None
    try:
        return {"observed": observed, "comparison": observed_against_plan(session, run, plan_id), "note": None}
    except ObservedComparisonError as error:
        return {"observed": observed, "comparison": None, "note": str(error)}


def _assumptions_of(
    session: Session, run: Run, choice: AssumptionChoice, settings: Settings, plan: ReadingPlan | None
) -> Assumptions:
    """The run's assumptions: each from the request, else the plan it is read with, else the file, else the
    settings."""
    return resolve_assumptions(
        link_gbps=choice.link_gbps,
        latency_us=choice.latency_us,
        ranks=choice.ranks,
        plan=plan.linked_document if plan else None,
        file_ranks=run.ranks,
        file_ranks_inferred=ranks_were_inferred(run.warnings),
        default_link_gbps=settings.assumed_link_gbps,
        default_latency_us=settings.assumed_latency_us,
    )


def _step_cost(run: Run, plan: ReadingPlan | None, analysis: dict, platform: Platform | None) -> dict | None:
    """What one step of the plan costs on this run (``results.step_cost``; sizes it did not measure read off its
    platform's expected curve when it names one), named with its plan: a training job's own step when the run
    observed one with its steps."""
    if plan is None:
        return None
    observed = run.summary.get("observed")
    if observed is not None and observed["steps"]:
        return {"plan": plan.header(), **observed_step_cost(plan.document, observed, analysis["groups"])}
    cost = step_cost(
        plan.document,
        analysis["groups"],
        source_format=run.source_format,
        ranks=run.ranks,
        sweep=analysis["kind"] == "size-sweep",
        measured=run.origin == "measured",
        expected_us=None if platform is None else healthy_time_us(platform),
    )
    return {"plan": plan.header(), **cost}


def _judged(
    run: Run, platform: Platform | None, assumptions: Assumptions, plan: ReadingPlan | None, costed: bool = True
) -> tuple[dict, dict, dict | None]:
    """The run's analysis under ``assumptions`` (with the expected curve of its platform), the step cost of the
    plan that reads it (None without one, or when not ``costed``: its reason is a note, which the verdict's
    status never depends on) and its verdict, which speaks in that step's time."""
    ranks = assumptions.ranks
    fabric = fabric_of(platform, ranks, run.hosts) if platform is not None and ranks and ranks >= 2 else None
    analysis = analyse(run.summary, run.kind, assumptions, plan.linked_document if plan else None, fabric)
    step = _step_cost(run, plan, analysis, platform) if costed else None
    verdict = judge_summary(
        {**run.summary, "groups": analysis["groups"]},
        run.kind,
        ranks=ranks,
        hosts=run.hosts,
        platform=platform,
        step=step if step is not None and "rows" in step else None,
    )
    return analysis, verdict.as_dict(), step


def run_judgement(session: Session, run: Run, settings: Settings) -> tuple[str, dict[str, float]]:
    """A run's verdict under its own assumptions and platform (what its page shows first), and per collective
    the best % of expected it reached where bandwidth dominates (``Thresholds.bandwidth_bound_latency_share``;
    else at its largest size): what /metrics exposes."""
    plan = reading_plan(session, run)
    platform = platform_named(session, run.platform) if run.platform else None
    assumptions = _assumptions_of(session, run, AssumptionChoice(), settings, plan)
    # /metrics and the stored verdict need the status and % of expected, not the step cost.
    analysis, verdict, _ = _judged(run, platform, assumptions, plan, costed=False)
    share = verdict["thresholds"]["bandwidth_bound_latency_share"]
    best: dict[str, float] = {}
    for collective in dict.fromkeys(g["collective"] for g in analysis["groups"]):
        judged = [g for g in analysis["groups"] if g["collective"] == collective and g.get("pct_of_expected")]
        bound = [g for g in judged if g["expected_latency_share"] <= share]
        at_large = bound or sorted(judged, key=lambda g: g["size_bytes"])[-1:]
        if at_large:
            best[collective] = max(g["pct_of_expected"] for g in at_large)
    return verdict["status"], best


def _platform_header(platform: Platform | None) -> dict | None:
    return None if platform is None else {"name": platform.name, "title": platform.title}


def run_statistics(
    session: Session, run: Run, choice: AssumptionChoice, settings: Settings, plan_id: int | None = None
) -> dict:
    """``GET /api/runs/{id}/stats``, ``emuplan stats`` and the run page: the cached statistics of one run
    with rates, % of ideal, the size-sweep view or the slowest trials under the chosen assumptions
    (each from the request, else the plan, else the file, else the settings), its ``platform`` with the
    expected busbw and % of expected per group, its ``verdict`` (``results.verdict``), and ``step_cost``:
    what one training step of its plan (``plan_id``, else its linked plan) costs on it, None without a plan."""
    plan = reading_plan(session, run, plan_id)
    platform = platform_named(session, run.platform) if run.platform else None
    analysis, verdict, step = _judged(run, platform, _assumptions_of(session, run, choice, settings, plan), plan)
    statistics = {
        "run_id": run.id,
        "name": run.name,
        "source_format": run.source_format,
        **run.summary,
        **analysis,
        "platform": _platform_header(platform),
        "verdict": verdict,
        "step_cost": step,
    }
    above = statistics["above_ideal_pct"]
    statistics["above_ideal_warning"] = above_ideal_warning(
        [(f"#{run.id} {run.name}", above, statistics["assumptions"])] if above is not None else []
    )
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
    # Titles say what the chart is: the page names the run, and a download is named after it (run-<id>-<kind>).
    if kind == FigureKind.SWEEP:
        statistics = run_statistics(session, run, choice, settings)
        if statistics["kind"] != "size-sweep":
            raise ValueError(
                f"figure: 'sweep' needs a size sweep (at most {SWEEP_MAX_SAMPLES} samples per data size); "
                "this run is a distribution"
            )
        return charts.sweep_figure(statistics["sweep"], title="Bus bandwidth vs data size")
    if kind in (FigureKind.RANKS, FigureKind.HOSTS):
        stragglers = summary_with_curves(session, run).get("stragglers")
        if not stragglers or (kind == FigureKind.HOSTS and not stragglers["hosts"]):
            raise ValueError(
                f"figure: {str(kind)!r} needs a file that times every rank"
                + (" on named hosts" if kind == FigureKind.HOSTS else "")
                + " (nccl-tests -J with -I 1 on several processes, per-flow records, a measured run)"
            )
        unit = stragglers["unit"] if kind == FigureKind.RANKS else "host"
        return charts.straggler_figure(stragglers, kind, title=f"Each {unit}'s time ÷ the median's")
    log_x = options.get("log_x", False)
    if kind in (FigureKind.CDF, FigureKind.DELAY) and run.kind == "size-sweep":
        # One value (or a few) per size: a CDF step or a delay point at iteration 0 says nothing a sweep does not.
        raise ValueError(
            f"figure: {str(kind)!r} needs a distribution (more than {SWEEP_MAX_SAMPLES} samples of a data size); "
            "this run is a size sweep: see 'sweep'"
        )
    if kind == FigureKind.CDF:
        return charts.cdf_figure(summary_with_curves(session, run), title="Completion-time CDF", log_x=log_x)
    if kind == FigureKind.DELAY:
        return charts.delay_figure(
            summary_with_curves(session, run),
            title="Completion time per iteration",
            per_size=run.strategy == "pipeline",
            log_y=options.get("log_y", False),
            clip=options.get("clip", False),
        )
    if kind == FigureKind.BANDWIDTH:
        return charts.bandwidth_figure(run.summary, title="Bandwidth vs data size")
    raise ValueError(f"figure: {kind!r} is not one of {', '.join(FigureKind)}")


def _bar_label(entry: dict) -> str:
    """A run's bar in the step-cost chart: its id and strategy (the table beside it names it in full)."""
    return f"#{entry['run_id']} {entry['strategy'] or ''}".strip()


def compare_stored_runs(
    session: Session,
    run_ids: list[int],
    baseline_id: int | None = None,
    *,
    settings: Settings,
    choice: AssumptionChoice = AssumptionChoice(),
    plans: dict[int, int] | None = None,
    log_x: bool = False,
) -> dict:
    """Statistics with deltas, KS tests, the size sweeps' per-size comparison, the step cost of each run's plan,
    each run's verdict and the comparison figures for stored runs (API, CLI, share pages), each run read as its
    stored kind. Bandwidths and % of ideal are each run's under the chosen assumptions, filled in per run like
    on its run page (``assumptions`` lists what each run got and from where). ``plans`` maps a run id to the
    plan to read it with (else its linked plan)."""
    plans = plans or {}
    stored = [get_run(session, run_id) for run_id in dict.fromkeys(run_ids)]
    unknown = sorted(set(plans) - {r.id for r in stored})
    if unknown:
        raise ValueError(f"plans: run {unknown[0]} is not one of the compared runs")
    with_curves = {r.id: summary_with_curves(session, r) for r in stored}
    summaries, assumptions, costs, over_ideal, verdicts = [], [], [], [], []
    for r in stored:
        plan = reading_plan(session, r, plans.get(r.id))
        platform = platform_named(session, r.platform) if r.platform else None
        analysis, verdict, cost = _judged(r, platform, _assumptions_of(session, r, choice, settings, plan), plan)
        verdicts.append({"run_id": r.id, "platform": _platform_header(platform), **verdict})
        summary = {**with_curves[r.id], "groups": analysis["groups"]}
        summaries.append(RunSummary(r.id, r.name, r.strategy, r.origin, summary, r.kind, analysis.get("sweep")))
        assumptions.append({"run_id": r.id, **analysis["assumptions"]})
        costs.append({"run_id": r.id, "name": r.name, "strategy": r.strategy,
                      "plan": cost["plan"] if cost else None, "cost": cost})  # fmt: skip
        if analysis["above_ideal_pct"] is not None:
            over_ideal.append((r, analysis["above_ideal_pct"], analysis["assumptions"]))
    comparison = compare_runs(summaries, baseline_id)
    comparison["assumptions"] = assumptions
    comparison["step_cost"] = compare_step_costs(costs, comparison["baseline_run_id"])
    comparison["verdicts"] = verdicts
    # % of ideal over 100 warns here as on the run page: the share page and the CLI show the same words.
    comparison["above_ideal"] = (
        {
            "highest_pct": max(pct for _, pct, _ in over_ideal),
            "run_ids": [r.id for r, _, _ in over_ideal],
            "warning": above_ideal_warning([(f"#{r.id} {r.name}", pct, a) for r, pct, a in over_ideal]),
        }
        if over_ideal
        else None
    )
    comparison["time_unit"], comparison["us_per_unit"] = page_time_unit([r.summary for r in stored])
    # Each run in its own kind's figures: a sweep's one value per size is a point of a busbw curve, never a
    # CDF step or a delay series at iteration 0.
    # A run wears one colour in every chart of the page: its place among the compared runs.
    sweep_places = [place for place, r in enumerate(stored) if r.kind == "size-sweep"]
    distribution_places = [place for place, r in enumerate(stored) if r.kind == "distribution"]
    sweeps = [(f"#{stored[i].id} {stored[i].name}", with_curves[stored[i].id]) for i in sweep_places]
    distributions = [(f"#{stored[i].id} {stored[i].name}", with_curves[stored[i].id]) for i in distribution_places]
    figures = {"sweeps": charts.comparison_sweep_figure(sweeps, sweep_places)} if sweeps else {}
    if distributions:
        figures |= {
            "cdf": charts.comparison_cdf_figure(distributions, log_x=log_x, places=distribution_places),
            "small_multiples": charts.comparison_small_multiples(distributions, log_x=log_x),
            "delays": charts.comparison_delay_figure(distributions),
        }
    costed = [(_bar_label(entry), entry["cost"]) for entry in costs if entry["cost"]]
    if costed:
        figures["step_cost"] = charts.step_cost_figure(costed)
    comparison["figures"] = figures
    return comparison
