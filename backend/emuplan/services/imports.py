"""The import use case: an uploaded or given result file becomes a stored run, top to bottom.

``import_result_file`` (``POST /api/runs``, ``emuplan import``): duplicate check -> format reader
(``results.parse.parse_result_file``, or ``results.streaming.streamed`` for a huge table) -> canonical table
(``ParsedResult``) -> ``save_run``: summary (``services.summaries``) -> verdict -> rows and blobs (``store.runs``).

``save_run`` also stores results that did not come as an upload (a local measurement, ``services.measurements``).
Storing writes the ``run`` row (with the overall median and p99 the lists show), its ``run_table`` Parquet blobs
(``samples``; ``flows`` for per-flow uploads; ``rank_times`` when the file times every rank), its ``run_summary``
row, its ``run_curves`` row and its case-folded tags in the caller's session — one transaction: the caller commits
once. An upload whose bytes have the SHA-256 of a stored run's raises ``DuplicateRun`` with the existing run's id
(the API answers 409 with ``existing_run_id``; the CLI prints it).
"""

import hashlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from sqlmodel import Session

from emuplan.errors import EmuplanError
from emuplan.results.analysis.run_analysis import (
    peak_busbw,
    run_kind,
)
from emuplan.results.analysis.stats import strip_curves
from emuplan.results.budget import DEFAULT_MAX_DECOMPRESSED_BYTES, ImportBudget, ImportLimits
from emuplan.results.canonical import ParsedResult
from emuplan.results.formats.observed import OBSERVED_FORMATS, parse_observed
from emuplan.results.parse import parse_result_file
from emuplan.results.streaming.streamed import (
    StreamedResult,
    streamed_result_file,
    streams,
    summarise_streamed,
)
from emuplan.services.platforms import refresh_verdict
from emuplan.services.runs import check_platform, checked_facts, checked_measured_at, checked_note, checked_tags
from emuplan.services.summaries import check_finite, network_of, store_listed_figures, summarised_and_encoded
from emuplan.store.runs import ORIGINS, RunInputError, find_duplicate, store_folded
from emuplan.store.table_files import store_table_file
from emuplan.store.tables import (
    CachedSummary,
    Run,
    RunCurves,
    RunTable,
)
from emuplan.workload.plan_options import Strategy


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


def sha256_hex(source: bytes | Path) -> str:
    if isinstance(source, Path):
        with source.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    return hashlib.sha256(source).hexdigest()


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
    measured_at: datetime | None = None,
) -> Run:
    """Add the run, its tables and its summary to ``session`` (flushed, not committed). ``platform``: the
    name of the platform profile it ran on (``store.platforms``), None when not said; ``facts``: its fabric
    facts (``checked_facts``); ``measured_at``: when it was measured (``checked_measured_at``), None when not
    said. A huge file read streamed (``results.streaming.streamed``) is summarised from its tables on disk and
    stored from them."""
    if strategy is not None and strategy not in list(Strategy):
        raise RunInputError(f"strategy: {strategy!r} is not one of {', '.join(Strategy)}")
    if origin not in ORIGINS:
        raise RunInputError(f"origin: {origin!r} is not one of {', '.join(ORIGINS)}")
    if not name.strip():
        raise RunInputError("name: a run needs a name")
    check_platform(session, platform)
    facts = checked_facts(facts or {})
    measured_at = None if measured_at is None else checked_measured_at(measured_at)
    if isinstance(parsed, StreamedResult):
        summary = summarise_streamed(parsed, network_of(session, plan_id))
        check_finite(summary, file_name or name)
        tables, encoded = {}, {}
    else:
        tables = {
            "samples": parsed.samples,
            **({"flows": parsed.flows} if parsed.flows is not None else {}),
            **({"rank_times": parsed.rank_times} if parsed.rank_times is not None else {}),
        }
        summary, encoded = summarised_and_encoded(parsed, tables, network_of(session, plan_id), file_name or name)
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
        measured_at=measured_at,
        cached_summary=CachedSummary(summary=strip_curves(summary)),
    )
    refresh_verdict(session, run)
    session.add(run)
    session.flush()
    store_listed_figures(session, run, summary)
    session.add(RunCurves(run_id=run.id, summary=summary))
    store_folded(session, run.id, tags, facts)
    for kind, table in tables.items():
        session.add(RunTable(run_id=run.id, kind=kind, row_count=table.num_rows, parquet=encoded[kind]))
    if isinstance(parsed, StreamedResult):
        for kind, path in parsed.tables.items():
            store_table_file(session, run.id, kind, path, parsed.row_counts[kind])
    session.flush()
    return run


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
    measured_at: datetime | None = None,
) -> Run:
    """Parse a result file (its bytes, or its path: an upload spooled to disk, a file given to the CLI)
    and store it as an imported run; ``DuplicateRun`` if its bytes are known. ``content_sha256`` is the
    digest when the caller already has it (hashed while the upload streamed in); ``budget``: the import's
    memory account (``parse_result_file``), which then caps instead of ``max_decompressed_bytes``.

    A table large enough (``results.streaming.streamed``) is read a block at a time into Parquet on disk and
    summarised from there, in memory that does not grow with it. Hashing and parsing touch no table, so the write
    transaction starts only after them: ``session`` is first used to store. A caller that knows the digest checks
    it first on a read session (``refuse_duplicate``)."""
    if budget is None:
        with ImportBudget(ImportLimits(max_decompressed_bytes=max_decompressed_bytes)) as own:
            return import_result_file(
                session, source, file_name, name=name, plan_id=plan_id, strategy=strategy, tags=tags, fmt=fmt,
                column_map=column_map, collective=collective, content_sha256=content_sha256, platform=platform,
                budget=own, facts=facts, measured_at=measured_at,
            )  # fmt: skip
    stated = {"name": name, "plan_id": plan_id, "strategy": strategy, "tags": tags, "platform": platform}
    stated |= {"facts": facts, "measured_at": measured_at}
    if streams(source, fmt, budget):
        with ThreadPoolExecutor(max_workers=1) as pool:
            hashing = pool.submit(sha256_hex, source) if content_sha256 is None else None
            with streamed_result_file(source, file_name, fmt, column_map, collective, budget) as streamed:
                content_sha256 = content_sha256 if hashing is None else hashing.result()
                if streamed is not None:
                    return _save_new(session, streamed, content_sha256, file_name, **stated)
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
    return _save_new(session, parsed, digest, file_name, **stated)


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
    measured_at: datetime | None = None,
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
    stated = {"plan_id": plan_id, "tags": tags, "platform": platform, "facts": facts, "measured_at": measured_at}
    return _save_new(session, parsed, digest, file_name, name=name, **stated)


def _save_new(session, parsed, digest: str, file_name: str, *, name: str | None, **stated) -> Run:
    """``parsed`` stored as a new run (``DuplicateRun`` if its digest is known) with what its importer
    ``stated`` of it (``save_run``'s plan_id, strategy, tags, platform, facts, measured_at)."""
    existing = find_duplicate(session, digest)
    if existing is not None:
        raise DuplicateRun(existing, file_name)
    origin = "observed" if parsed.source_format in OBSERVED_FORMATS else "imported"
    return save_run(
        session, parsed, name=name or file_name, origin=origin, file_name=file_name, content_sha256=digest, **stated
    )
