"""Run rows: read one, list and count them (filters, sorts, pages), their tables and cached summaries, the
case-folded tags and facts the filters look up, and deletion. What goes into a run (parsing, statistics, verdicts)
is ``services.imports`` and ``services.runs``; this module only reads and writes the rows they compute."""

from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Literal, get_args

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import delete, exists, func
from sqlmodel import Session, col, select

from emuplan.results.analysis.run_analysis import (
    RunKind,
)
from emuplan.results.analysis.verdict import DEGRADED, FAIL, NOT_JUDGED, PASS
from emuplan.store.rows import RunNotFound
from emuplan.store.table_files import open_stored_table
from emuplan.store.tables import (
    Comparison,
    Run,
    RunCollective,
    RunCurves,
    RunFact,
    RunTable,
    RunTag,
    RunTrendFigures,
)

# observed: what a training job sent, from its own records (NCCL Inspector, PyTorch profiler).
Origin = Literal["imported", "measured", "generated", "observed"]
ORIGINS = get_args(Origin)
# Lists show one page of runs at a time, so they cost the same at 10 runs and at 10,000.
RUNS_PER_PAGE = 50
MAX_RUNS_PER_PAGE = 1000


class RunInputError(ValueError):
    """A bad field of the import request (strategy, plan, origin) rather than of the file."""


def stored_rows(session: Session, run_id: int) -> int:
    """The rows of every table of the run (a table stored in parts counts them in its first), what loading them
    whole holds ``ROW_BYTES`` each of."""
    counts = session.exec(select(func.sum(RunTable.row_count)).where(RunTable.run_id == run_id)).one()
    return int(counts or 0)


def stored_table_bytes(session: Session, run_id: int) -> int:
    """The bytes of the run's stored tables (every part), what summarising it again streamed reads."""
    return int(
        session.exec(select(func.sum(func.length(RunTable.parquet))).where(RunTable.run_id == run_id)).one() or 0
    )


def set_listed_figures(session: Session, run: Run, collectives: list[str], sizes: list[int]) -> None:
    """What the list shows of the statistics beside the headline: the collectives (and their rows in
    ``run_collective``, which the list's filter reads) and the range of sizes. ``run`` has its id."""
    run.collectives = collectives
    run.first_collective = run.collectives[0] if run.collectives else None
    session.exec(delete(RunCollective).where(RunCollective.run_id == run.id))
    session.add_all(RunCollective(run_id=run.id, collective=name) for name in run.collectives)
    run.size_min_bytes, run.size_max_bytes = min(sizes, default=None), max(sizes, default=None)


def store_folded(session: Session, run_id: int, tags: list[str], facts: dict[str, str]) -> None:
    """The case-folded tags and facts the list's filters look up (``run_tag``, ``run_fact``), replacing any."""
    session.exec(delete(RunTag).where(RunTag.run_id == run_id))
    session.exec(delete(RunFact).where(RunFact.run_id == run_id))
    session.add_all(RunTag(run_id=run_id, folded_tag=folded) for folded in {tag.casefold() for tag in tags})
    session.add_all(
        RunFact(run_id=run_id, folded_key=key.casefold(), folded_value=value.casefold()) for key, value in facts.items()
    )


def find_duplicate(session: Session, content_sha256: str) -> Run | None:
    return session.exec(select(Run).where(Run.content_sha256 == content_sha256).order_by(Run.id)).first()


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
    these dataclasses; the fields a user states are described by ``results.run_fields``)."""
    return field(metadata={"description": description})


@dataclass(frozen=True, slots=True)
class RunBase:
    """What every document of a run holds: the list's item (``RunListItem``) and the whole run (``RunPublic``).
    The one definition of their fields: ``api.runs`` derives its response models of the same names from these, and
    a run's changes are ``services.runs.RunUpdate``. Plain objects, not the database row: templates read their
    attributes several times a row, and a row's attribute lookup costs more."""

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
    facts: dict[str, str]  # described, as every field a user states, by results.run_fields
    created_at: datetime

    def document(self) -> dict:
        """As the API and the CLI's ``--json`` give it: every field, the time as ISO 8601 text."""
        return {
            **{each.name: getattr(self, each.name) for each in fields(self)},
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class RunListItem(RunBase):
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
class RunPublic(RunBase):
    """The whole run (``GET /api/runs/{id}``, ``emuplan import --json``): with its file, its ranks and hosts,
    its warnings and its statistics (without their curve arrays)."""

    file_name: str | None
    content_sha256: str | None
    note: str
    warnings: list[str]
    summary: dict
    measured_at: datetime | None

    def document(self) -> dict:
        measured_at = None if self.measured_at is None else self.measured_at.isoformat()
        return {**RunBase.document(self), "measured_at": measured_at}


LIST_COLUMNS = tuple(getattr(Run, listed.name) for listed in fields(RunListItem))

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
) -> list[RunListItem]:
    """Runs matching ``filters`` in the ``sort`` order (newest first by default), ``limit`` of them from
    ``offset`` (all when ``limit`` is None).

    ``total`` is how many runs the filters match (``count_runs``), when the caller has counted them exactly: a page
    in the older half of a newest-first list is then read from the oldest end. OFFSET steps over the index
    entries it skips one by one, so page 200 of 10,000 runs steps over 0 of them, not 9,950."""
    check_sort(sort)
    if sort != "newest":
        page = _sorted_ids(session, filters, sort, limit, offset)
        rows = {row[0]: RunListItem(*row) for row in session.exec(select(*LIST_COLUMNS).where(col(Run.id).in_(page)))}
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
    return [RunListItem(*row) for row in session.exec(query)]


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

    if not has_table(session, run_id, kind):
        return None
    with open_stored_table(session, run_id, kind) as stored:
        return pq.read_table(stored)


def has_table(session: Session, run_id: int, kind: str) -> bool:
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
    return RunPublic(**{each.name: getattr(run, each.name) for each in fields(RunPublic)}).document()


def summary_with_curves(session: Session, run: Run) -> dict:
    """The run's whole cached summary: statistics, ECDF grids and delay series."""
    return session.get(RunCurves, run.id).summary
