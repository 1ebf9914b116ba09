"""A stored run's use cases: edit it (rename, tags, facts, plan link), relabel its collectives and summarise it
again, name its platform, and read it: statistics under chosen assumptions, verdict, step cost, figures. The rows
themselves are ``store.runs``; an import is ``services.imports``."""

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, select

from emuplan import charts
from emuplan.charts import FigureKind
from emuplan.results.analysis.expected import fabric_of, healthy_time_us
from emuplan.results.analysis.plan_vs_observed import ObservedComparisonError, compare_plan_with_observed
from emuplan.results.analysis.run_analysis import (
    SWEEP_MAX_SAMPLES,
    Assumptions,
    above_ideal_warning,
    analyse,
    peak_busbw,
    resolve_assumptions,
    run_kind,
)
from emuplan.results.analysis.stats import NetworkModel, collectives_in, strip_curves
from emuplan.results.analysis.step_cost import observed_step_cost, step_cost
from emuplan.results.analysis.verdict import judge_summary
from emuplan.results.budget import ROW_BYTES, ImportBudget, ImportLimits
from emuplan.results.canonical import ParsedResult, renamed_text
from emuplan.results.formats import NCCL_TESTS
from emuplan.results.formats.nccl_tests_shared import RANKS_INFERRED, ranks_from_bandwidths, ranks_were_inferred
from emuplan.results.run_fields import (
    MAX_FACT_KEY,
    MAX_FACT_VALUE,
    MAX_FACTS,
    MAX_NAME,
    MAX_NOTE,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    RUN_FIELDS,
)
from emuplan.results.streaming.streamed import (
    STREAMED_FORMATS,
    StreamedResult,
    stored_result,
    summarise_streamed,
)
from emuplan.services.platforms import platform_named, refresh_verdict
from emuplan.services.summaries import check_finite, network_of, store_listed_figures, summarised_and_encoded
from emuplan.settings import Settings
from emuplan.store.db import Database
from emuplan.store.plans import get_plan, plan_document
from emuplan.store.platforms import platform_exists
from emuplan.store.rows import DatabaseInt
from emuplan.store.runs import (
    RunInputError,
    get_run,
    has_table,
    load_samples,
    load_table,
    store_folded,
    stored_rows,
    summary_with_curves,
)
from emuplan.store.table_files import ReadReported, drop_stored_table, open_stored_table, store_table_file
from emuplan.store.tables import (
    Plan,
    Run,
    RunCurves,
    RunTable,
    utc_now,
)
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanDocument
from emuplan.workload.platforms import Platform

# The limits of a run summarised again by a caller without settings (a plan's deletion).
DEFAULT_LIMITS = ImportLimits()


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
    network = network_of(session, run.plan_id)
    with ImportBudget(limits) as budget:
        if _summarised_streamed(session, run, limits):
            ranks, warnings = run.ranks, list(run.warnings)
            opened = partial(open_stored_table, session, run.id)
            with _streamed_summary(session, run, collectives, network, budget, opened) as (summary, result):
                if collectives:
                    _store_samples_again(session, run.id, result)
        else:
            budget.count_rows(stored_rows(session, run.id), run.file_name or run.name)
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
    store_listed_figures(session, run, summary)
    refresh_verdict(session, run)
    run.cached_summary.summary = strip_curves(summary)
    session.get(RunCurves, run.id).summary = summary
    session.add(run)
    session.flush()
    return run


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
    kinds = ["samples", *(["flows"] if has_table(session, run.id, "flows") else [])]
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
        check_finite(summary, where)
        yield summary, result


def _store_samples_again(session: Session, run_id: int, result: StreamedResult) -> None:
    drop_stored_table(session, run_id, "samples")
    store_table_file(session, run_id, "samples", result.tables["samples"], result.row_counts["samples"])


def summarised_again_in_background(session: Session, run_id: int, limits: ImportLimits) -> bool:
    """Whether relabelling the run or changing its plan summarises it again streamed (``_summarised_streamed``),
    which takes minutes at 100 M rows: a job (``services/jobs/relabel.py``) rather than a request's work."""
    return _summarised_streamed(session, get_run(session, run_id), limits)


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
        network = network_of(reading, plan_id)
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
    summary, encoded = summarised_and_encoded(parsed, {"samples": samples}, network, run.file_name or run.name)
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


def check_platform(session: Session, platform: str | None) -> None:
    if platform is not None and not platform_exists(session, platform):
        raise RunInputError(f"platform: no platform named {platform!r} (GET /api/platforms lists them)")


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


def set_run_platform(session: Session, run_id: int, platform: str | None) -> Run:
    """Name the platform a run ran on (None: none), in the caller's session: its expected curve, % of
    expected and verdict follow on every page, computed when read."""
    run = get_run(session, run_id)
    check_platform(session, platform)
    run.platform = platform
    refresh_verdict(session, run)
    session.add(run)
    session.flush()
    return run


def stated_field(name: str, *, given: str = "", **limits):
    """The pydantic ``Field`` of the run's stated field ``name`` (``results.run_fields``): not given by default, its
    description followed by how this surface takes it (``given``), its text's length; ``limits`` add others."""
    spec = RUN_FIELDS[name]
    if spec.max_length is not None and spec.max_items is None:
        limits.setdefault("max_length", spec.max_length)
    return Field(default=None, title=spec.title, description=spec.described(given), **limits)


class RunUpdate(BaseModel):
    """What to change of a stored run (``PATCH /api/runs/{id}``, ``emuplan runs edit``, ``update_run``): only the
    fields given change; ``platform`` and ``plan_id`` given as null clear them (``plan_id`` 0 too)."""

    model_config = ConfigDict(extra="forbid")

    collectives: dict[str, Literal[tuple(op.value for op in CollectiveOp)]] | None = Field(
        default=None,
        description='Each collective of the run to rename → its new name, e.g. {"unknown": "all_reduce"}; the '
        "statistics (bus bandwidth, ideal time, groups) are computed again.",
    )
    platform: str | None = stated_field("platform", given="null: none.")
    name: str | None = stated_field("name")
    measured_at: datetime | None = stated_field("measured_at")
    tags: list[Annotated[str, Field(max_length=MAX_TAG_LENGTH)]] | None = stated_field(
        "tags", given="Given, they replace its tags.", max_length=MAX_TAGS
    )
    note: str | None = stated_field("note", given="'' clears it.")
    facts: dict[str, str] | None = stated_field(
        "facts",
        given='Given, they replace its facts: {"topology": "rail-optimised", "nic": "ConnectX-7"}; {} clears them.',
        max_length=MAX_FACTS,
    )
    plan_id: DatabaseInt | None = stated_field(
        "plan_id", given="Its statistics are computed again and its verdict judged again; null (or 0): unlink."
    )


def checked_measured_at(moment: datetime) -> datetime:
    """When a run was measured, in UTC: a time without its offset is refused rather than guessed."""
    if moment.tzinfo is None:
        raise RunInputError(f"measured_at: {moment.isoformat()} has no UTC offset; add one (Z for UTC)")
    if moment > utc_now():
        raise RunInputError(f"measured_at: {moment.isoformat()} is in the future")
    return moment.astimezone(UTC)


def update_run(session: Session, run_id: int, changes: RunUpdate, limits: ImportLimits = DEFAULT_LIMITS) -> Run:
    """The ``changes`` given made (in the caller's session, flushed): its platform named, its collectives relabelled
    (``relabel_collectives``), renamed, retagged, annotated, its facts stated, linked to a plan or unlinked.
    Relabelling, linking or unlinking computes its statistics again (a huge run in the streamed import's memory,
    ``limits``), since the plan's network gives its ideal times, and judges it again, since the plan's GPUs give its
    rank count."""
    given = changes.model_fields_set
    if "platform" in given:
        set_run_platform(session, run_id, changes.platform)
    if changes.collectives is not None:
        relabel_collectives(session, run_id, changes.collectives, limits)
    run = get_run(session, run_id)
    if changes.name is not None:
        if not changes.name.strip():
            raise RunInputError("name: a run needs a name")
        run.name = changes.name.strip()[:MAX_NAME]
    if changes.note is not None:
        run.note = checked_note(changes.note)
    if changes.measured_at is not None:
        run.measured_at = checked_measured_at(changes.measured_at)
    if changes.tags is not None or changes.facts is not None:
        run.tags = checked_tags(changes.tags) if changes.tags is not None else run.tags
        run.facts = checked_facts(changes.facts) if changes.facts is not None else run.facts
        store_folded(session, run.id, run.tags, run.facts)
    session.add(run)
    if "plan_id" in given:
        plan_id = changes.plan_id or None
        if plan_id is not None:
            get_plan(session, plan_id)
        if plan_id != run.plan_id:
            run.plan_id = plan_id
            _summarised_again(session, run, {}, limits)
    session.flush()
    return run


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
    else its linked one), per step (``results.analysis.plan_vs_observed``), with the plan named."""
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


def assumptions_of(
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
    """What one step of the plan costs on this run (``results.analysis.step_cost``; sizes it did not measure read
    off its platform's expected curve when it names one), named with its plan: a training job's own step when the run
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


def judged_run(
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
    assumptions = assumptions_of(session, run, AssumptionChoice(), settings, plan)
    # /metrics and the stored verdict need the status and % of expected, not the step cost.
    analysis, verdict, _ = judged_run(run, platform, assumptions, plan, costed=False)
    share = verdict["thresholds"]["bandwidth_bound_latency_share"]
    best: dict[str, float] = {}
    for collective in dict.fromkeys(g["collective"] for g in analysis["groups"]):
        judged = [g for g in analysis["groups"] if g["collective"] == collective and g.get("pct_of_expected")]
        bound = [g for g in judged if g["expected_latency_share"] <= share]
        at_large = bound or sorted(judged, key=lambda g: g["size_bytes"])[-1:]
        if at_large:
            best[collective] = max(g["pct_of_expected"] for g in at_large)
    return verdict["status"], best


def platform_header(platform: Platform | None) -> dict | None:
    return None if platform is None else {"name": platform.name, "title": platform.title}


def run_statistics(
    session: Session, run: Run, choice: AssumptionChoice, settings: Settings, plan_id: int | None = None
) -> dict:
    """``GET /api/runs/{id}/stats``, ``emuplan stats`` and the run page: the cached statistics of one run
    with rates, % of ideal, the size-sweep view or the slowest trials under the chosen assumptions
    (each from the request, else the plan, else the file, else the settings), its ``platform`` with the
    expected busbw and % of expected per group, its ``verdict`` (``results.analysis.verdict``), and ``step_cost``:
    what one training step of its plan (``plan_id``, else its linked plan) costs on it, None without a plan."""
    plan = reading_plan(session, run, plan_id)
    platform = platform_named(session, run.platform) if run.platform else None
    analysis, verdict, step = judged_run(run, platform, assumptions_of(session, run, choice, settings, plan), plan)
    statistics = {
        "run_id": run.id,
        "name": run.name,
        "source_format": run.source_format,
        **run.summary,
        **analysis,
        "platform": platform_header(platform),
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
